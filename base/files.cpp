#include "base/files.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <string>

namespace mlk {

namespace {

// "cannot read PATH: No such file or directory" and the like: the OS's words.
Status io_error(const char* what, const std::string& path, int err) {
  return Status::IOError(std::string(what) + " " + path + ": " + std::strerror(err));
}

// Writes `bytes` to `fd` and closes it.
Status write_fd(int fd, const std::string& path, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return io_error("cannot write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return io_error("cannot write", path, errno);
  return Status::Ok();
}

}  // namespace

Expected<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot read", path, errno);
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::IOError("cannot read " + path + ": it is a directory");
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return io_error("error while reading", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status replace_file_in_dir(const std::string& dir, const std::string& name, std::string_view bytes) {
  const std::string path = dir + "/" + name;
  int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return io_error("cannot write", path, errno);
  std::string tmp;
  int fd = -1;
  for (int i = 0; i < 100 && fd < 0; ++i) {
    tmp = "." + name + ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(i);
    fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  auto failed = [&](int err) {
    if (fd >= 0) ::close(fd);
    ::unlinkat(dirfd, tmp.c_str(), 0);
    ::close(dirfd);
    return io_error("cannot write", path, err);
  };
  if (fd < 0) {
    const int err = errno;
    ::close(dirfd);
    return io_error("cannot write", path, err);
  }
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed(errno);
    done += static_cast<size_t>(n);
  }
  int err = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  fd = -1;
  if (err != 0) return failed(err);
  if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) return failed(errno);
  ::close(dirfd);
  return Status::Ok();
}

Status ensure_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return io_error("cannot create", path, errno);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return io_error("cannot read", path, errno);
  if (!S_ISDIR(st.st_mode))
    return Status::InvalidArgument(path + " is not a directory (a link or a file stands there); remove it, or keep "
                                          "the store in a folder of your own");
  if (st.st_uid != ::geteuid())
    return Status::InvalidArgument(path + " belongs to user " + std::to_string(st.st_uid) +
                                   ", not to this one: another user made it first, and its files could be theirs; "
                                   "keep the store in a folder of your own");
  if ((st.st_mode & 0777) != 0700 && ::chmod(path.c_str(), 0700) != 0) return io_error("cannot make private", path, errno);
  return Status::Ok();
}

Expected<std::string> make_private_temp_dir(const std::string& prefix) {
  const char* env = std::getenv("TMPDIR");
  std::string tmpl = std::string(env && *env ? env : "/tmp") + "/" + prefix + "XXXXXX";
  if (!mkdtemp(tmpl.data())) return io_error("cannot create a private temporary directory", tmpl, errno);
  return tmpl;
}

Status write_new_file(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot write", path, errno);
  return write_fd(fd, path, bytes);
}

Status write_file(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot write", path, errno);
  return write_fd(fd, path, bytes);
}


std::vector<std::string> home_folders() {
  std::vector<std::string> out;
  auto add = [&](const char* h) {
    if (!h || h[0] != '/' || std::string(h) == "/") return;
    std::error_code ec;
    auto real = std::filesystem::weakly_canonical(h, ec);
    const std::string p = ec ? std::string(h) : real.string();
    if (p != "/" && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  add(std::getenv("HOME"));
  if (const passwd* pw = ::getpwuid(::geteuid())) add(pw->pw_dir);
  return out;
}

}  // namespace mlk
