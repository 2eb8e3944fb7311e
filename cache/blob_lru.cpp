#include "cache/blob_lru.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/files.h"
#include "base/sha256.h"
#include "cache/manifest.h"
#include "cache/store_internal.h"

namespace mlk::cache {

namespace {
std::atomic<uint64_t> tmp_counter_{0};  // distinct temporary names across threads
}  // namespace

Expected<std::unique_ptr<BlobLru>> BlobLru::Open(const std::string& dir, int64_t max_bytes) {
  std::unique_ptr<BlobLru> lru(new BlobLru());
  lru->dir_ = dir;
  lru->max_bytes_ = dir.empty() ? 0 : max_bytes;
  if (lru->max_bytes_ <= 0) return lru;
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/') continue;
    std::string part = dir.substr(0, i);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)  // folders made here are the server's user's alone
      return Status::IOError(part + ": cannot create the blob cache directory: " + std::strerror(errno));
  }
  // The cached blobs are other teams' bytes, and a part-read serves them
  // unhashed: the directory is the server's user's alone (a real folder,
  // not a link, 0700), where no other user can put another in its place
  // (review 12: a folder planted or swapped by the owner of a parent).
  MLK_RETURN_IF_ERROR(check_store_place(dir + "/blob"));
  if (Status s = ensure_private_dir(dir); !s.ok())
    return Status::InvalidArgument(dir + ": not usable as the blob cache directory: " + s.message());
  DIR* d = opendir(dir.c_str());
  if (!d) return Status::IOError(dir + ": cannot read the blob cache directory: " + std::strerror(errno));
  std::vector<std::pair<int64_t, std::pair<std::string, int64_t>>> found;  // mtime, (digest, size)
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    std::string path = dir + "/" + name;
    if (name == "." || name == "..") continue;
    if (!is_sha256_hex(name)) {
      if (name.find(".tmp.") != std::string::npos) unlink(path.c_str());  // left by a killed replica
      continue;
    }
    struct stat st;
    if (stat(path.c_str(), &st) == 0) found.push_back({st.st_mtime, {name, st.st_size}});
  }
  closedir(d);
  std::sort(found.begin(), found.end());
  std::lock_guard<std::mutex> lock(lru->mu_);
  for (const auto& [mtime, f] : found) {
    lru->order_.push_front(f.first);
    lru->index_[f.first] = {lru->order_.begin(), f.second};
    lru->total_ += f.second;
  }
  lru->evict_locked();
  return lru;
}

void BlobLru::forget_locked(const std::string& digest) {
  auto it = index_.find(digest);
  if (it == index_.end()) return;
  total_ -= it->second.second;
  order_.erase(it->second.first);
  index_.erase(it);
  unlink((dir_ + "/" + digest).c_str());
}

void BlobLru::evict_locked() {
  while (total_ > max_bytes_ && !order_.empty()) forget_locked(order_.back());
}

std::optional<std::string> BlobLru::get(const std::string& digest) {
  if (max_bytes_ <= 0) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(digest);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second.first);
  }
  auto bytes = read_file(dir_ + "/" + digest);
  if (bytes.ok() && sha256_hex(*bytes) == digest) return std::move(*bytes);
  drop(digest);  // damaged or gone: the blob store has the truth
  return std::nullopt;
}

std::optional<std::string> BlobLru::read_range(const std::string& digest, int64_t offset, int64_t length) {
  if (max_bytes_ <= 0 || offset < 0 || length < 0) return std::nullopt;
  int64_t size = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(digest);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second.first);
    size = it->second.second;
  }
  int fd = ::open((dir_ + "/" + digest).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out(static_cast<size_t>(std::max<int64_t>(0, std::min(length, size - offset))), '\0');
  ssize_t got = out.empty() ? 0 : ::pread(fd, out.data(), out.size(), offset);
  ::close(fd);
  if (got != static_cast<ssize_t>(out.size())) return std::nullopt;
  return out;
}

void BlobLru::put(const std::string& digest, std::string_view bytes) {
  if (max_bytes_ <= 0 || static_cast<int64_t>(bytes.size()) > max_bytes_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(digest)) return;
  }
  std::string path = dir_ + "/" + digest;
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(tmp_counter_++);
  if (!write_file(tmp, bytes).ok() || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(digest)) return;
  order_.push_front(digest);
  index_[digest] = {order_.begin(), static_cast<int64_t>(bytes.size())};
  total_ += static_cast<int64_t>(bytes.size());
  evict_locked();
}

void BlobLru::drop(const std::string& digest) {
  std::lock_guard<std::mutex> lock(mu_);
  forget_locked(digest);
}

int64_t BlobLru::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

int64_t BlobLru::files() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(index_.size());
}

}  // namespace mlk::cache
