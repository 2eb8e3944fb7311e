// Incremental SHA-256 through OpenSSL's EVP interface: what the server uses to
// hash a body while it arrives, and the client to check what it downloads.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace mlk::service {

// Not thread-safe; one per stream of bytes. final_hex() may be called once.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void update(std::string_view bytes);
  // The digest of everything updated so far, 64 lower-case hex characters.
  std::string final_hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace mlk::service
