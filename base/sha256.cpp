#include "base/sha256.h"

#include <openssl/evp.h>

#include "base/status.h"

namespace mlk {

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  int ok = EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  MLK_CHECK(ok == 1 && len == 32, "EVP_Digest(sha256) failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace mlk
