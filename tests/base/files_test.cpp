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

}  // namespace
}  // namespace mlk
