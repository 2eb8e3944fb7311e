// SHA-256 of bytes, as lower-case hex (through OpenSSL's libcrypto).
#pragma once

#include <string>
#include <string_view>

namespace mlk {

std::string sha256_hex(std::string_view bytes);

}  // namespace mlk
