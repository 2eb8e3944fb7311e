// base/files.h: replace_file_in_dir never writes through a link (review 8
// of issue 49: `mlk verify --artifact DIR --sign` wrote the signed manifest
// through a link planted in DIR while its levels ran, over any file the
// verifier could write); private temporary folders are private.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "base/files.h"

namespace mlk {
namespace {

namespace fs = std::filesystem;

TEST(Files, ReplacingAFileInADirectoryNeverFollowsALinkThere) {
  auto dir = make_private_temp_dir("mlk-files-test-");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  struct stat st {};
  ASSERT_EQ(stat(dir->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string victim = *dir + "/victim.txt", name = *dir + "/manifest.json";
  ASSERT_TRUE(write_file(victim, "the verifier's file").ok());
  fs::create_symlink(victim, name);
  ASSERT_TRUE(replace_file_in_dir(*dir, "manifest.json", "{\"signed\": true}").ok());
  EXPECT_EQ(*read_file(victim), "the verifier's file");
  EXPECT_FALSE(fs::is_symlink(name));
  EXPECT_EQ(*read_file(name), "{\"signed\": true}");
  // Again over the plain file; no temporary is left beside it.
  ASSERT_TRUE(replace_file_in_dir(*dir, "manifest.json", "{}").ok());
  EXPECT_EQ(*read_file(name), "{}");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(*dir)) entries += e.path().filename().string()[0] == '.' ? 100 : 1;
  EXPECT_EQ(entries, 2);
  EXPECT_EQ(replace_file_in_dir(*dir + "/none", "x", "").message().rfind("cannot write " + *dir + "/none/x: ", 0), 0u);
  fs::remove_all(*dir);
}

// Review 9: STORE.work beside a store in a shared folder could be made
// first by another user. A link is refused; the user's own folder is made
// private.
TEST(Files, APrivateDirectoryIsTheUsersOwnAndNoLink) {
  auto dir = make_private_temp_dir("mlk-files-test-");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  const std::string fresh = *dir + "/fresh", mine = *dir + "/mine", link = *dir + "/link";
  ASSERT_TRUE(ensure_private_dir(fresh).ok());
  struct stat st {};
  ASSERT_EQ(stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::mkdir(mine.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(mine.c_str(), 0755), 0);
  ASSERT_TRUE(ensure_private_dir(mine).ok());
  ASSERT_EQ(stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  fs::create_directory_symlink(fresh, link);
  EXPECT_EQ(ensure_private_dir(link).message(),
            link + " is not a directory (a link or a file stands there); remove it, or keep the store in a folder of "
                   "your own");
  fs::remove_all(*dir);
}

}  // namespace
}  // namespace mlk
