#include "service/sha256_stream.h"

#include <openssl/evp.h>

#include "base/status.h"

namespace mlk::service {

struct Sha256Stream::Ctx {
  EVP_MD_CTX* md = nullptr;
  bool finished = false;
};

Sha256Stream::Sha256Stream() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  MLK_CHECK(ctx_->md != nullptr, "EVP_MD_CTX_new failed");
  MLK_CHECK(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1, "EVP_DigestInit_ex(sha256) failed");
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(ctx_->md); }

void Sha256Stream::update(std::string_view bytes) {
  MLK_CHECK(!ctx_->finished, "Sha256Stream updated after final_hex");
  if (!bytes.empty()) MLK_CHECK(EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) == 1, "EVP_DigestUpdate failed");
}

std::string Sha256Stream::final_hex() {
  MLK_CHECK(!ctx_->finished, "Sha256Stream::final_hex called twice");
  ctx_->finished = true;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  MLK_CHECK(EVP_DigestFinal_ex(ctx_->md, md, &len) == 1 && len == 32, "EVP_DigestFinal_ex failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace mlk::service
