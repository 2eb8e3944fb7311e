#include "base/signing.h"

#include <cstdlib>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/files.h"
#include "base/sha256.h"

namespace mlk {

namespace {

std::string to_hex(const unsigned char* p, size_t n) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += hex[p[i] >> 4];
    out += hex[p[i] & 15];
  }
  return out;
}

bool is_hex_of(std::string_view s, size_t chars) {
  if (s.size() != chars) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string from_hex(std::string_view s) {  // s is valid hex of even length
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out += static_cast<char>(v(s[i]) * 16 + v(s[i + 1]));
  return out;
}

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  if (!e) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

std::shared_ptr<evp_pkey_st> own(EVP_PKEY* p) { return std::shared_ptr<evp_pkey_st>(p, EVP_PKEY_free); }

// The public half of `pkey`, filled into a SigningKey.
Expected<SigningKey> with_public(std::shared_ptr<evp_pkey_st> pkey) {
  unsigned char raw[32];
  size_t len = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(pkey.get(), raw, &len) != 1 || len != 32)
    return Status::Internal("cannot read the Ed25519 public key: " + openssl_error());
  SigningKey k;
  k.pkey = std::move(pkey);
  k.public_key = to_hex(raw, len);
  k.key_id = key_id_of(k.public_key);
  return k;
}

}  // namespace

bool is_public_key_hex(std::string_view s) { return is_hex_of(s, 64); }

std::string key_id_of(const std::string& public_key_hex) {
  return sha256_hex(from_hex(public_key_hex)).substr(0, 16);
}

Expected<SigningKey> create_signing_key() {
  EVP_PKEY* p = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (!p) return Status::Internal("cannot create an Ed25519 key: " + openssl_error());
  return with_public(own(p));
}

Expected<std::string> private_key_pem(const SigningKey& key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key.pkey.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return Status::Internal("cannot encode the private key as PEM: " + openssl_error());
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Status write_private_key(const std::string& path, const SigningKey& key) {
  auto pem = private_key_pem(key);
  if (!pem.ok()) return pem.status();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::IOError("cannot create " + path + ": " + std::strerror(errno) +
                           (errno == EEXIST ? " (a key file is never replaced; remove it or choose another name)" : ""));
  size_t off = 0;
  while (off < pem->size()) {
    ssize_t w = ::write(fd, pem->data() + off, pem->size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ::close(fd);
      return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

Expected<SigningKey> load_signing_key(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.status();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())), BIO_free);
  EVP_PKEY* p = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (!p) {
    ERR_clear_error();
    return Status::InvalidArgument(path + " is not a PEM private key (make one with `mlk key create`)");
  }
  auto pkey = own(p);
  if (EVP_PKEY_get_base_id(p) != EVP_PKEY_ED25519)
    return Status::InvalidArgument(path + " holds a " + std::string(EVP_PKEY_get0_type_name(p) ? EVP_PKEY_get0_type_name(p) : "non-Ed25519") +
                                   " key; mlk signs with Ed25519 keys only (`mlk key create`)");
  return with_public(std::move(pkey));
}

Expected<std::string> sign_bytes(const SigningKey& key, std::string_view bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char sig[64];
  size_t len = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &len, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) != 1 ||
      len != 64)
    return Status::Internal("cannot sign with key " + key.key_id + ": " + openssl_error());
  return to_hex(sig, len);
}

Status verify_signature(const std::string& public_key_hex, std::string_view bytes, const std::string& sig_hex) {
  if (!is_public_key_hex(public_key_hex))
    return Status::InvalidArgument("`" + public_key_hex.substr(0, 80) + "` is not an Ed25519 public key (64 hex characters)");
  if (!is_hex_of(sig_hex, 128))
    return Status::InvalidArgument("the signature by key " + key_id_of(public_key_hex) +
                                   " is malformed (an Ed25519 signature is 128 hex characters)");
  std::string raw = from_hex(public_key_hex), sig = from_hex(sig_hex);
  EVP_PKEY* p = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                            reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  if (!p) return Status::InvalidArgument("`" + public_key_hex + "` is not a valid Ed25519 public key: " + openssl_error());
  auto pkey = own(p);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  int ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, p) == 1
               ? EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                                  reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size())
               : -1;
  ERR_clear_error();
  if (ok != 1)
    return Status::InvalidArgument("the signature by key " + key_id_of(public_key_hex) +
                                   " does not verify (the signed bytes were changed after signing, or it was made "
                                   "for other bytes)");
  return Status::Ok();
}

Expected<std::vector<std::string>> parse_trusted_keys(const std::string& text) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string key = item;
    if (!is_public_key_hex(item)) {
      auto file = item.empty() ? Expected<std::string>(Status::NotFound("")) : read_file(item);
      if (!file.ok())
        return Status::InvalidArgument("trusted key `" + item.substr(0, 80) +
                                       "` is neither an Ed25519 public key (64 hex characters) nor a readable .pub file");
      size_t b = file->find_first_not_of(" \t\r\n");
      size_t e = b == std::string::npos ? b : file->find_first_of(" \t\r\n", b);
      key = b == std::string::npos ? "" : file->substr(b, e == std::string::npos ? std::string::npos : e - b);
      if (!is_public_key_hex(key))
        return Status::InvalidArgument("trusted key file " + item + " does not start with an Ed25519 public key "
                                       "(64 hex characters, as `mlk key create` writes KEY.pub)");
    }
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return keys;
}

Expected<std::vector<std::string>> default_trusted_signers() {
  const char* v = std::getenv("MLK_TRUSTED_SIGNERS");
  if (!v || !*v) return std::vector<std::string>{};
  // A relative path would name a different file in every folder a program
  // starts in (a shared checkout, /tmp): whoever controls that folder would
  // choose a trusted key (review 12). Keys or absolute paths only.
  const std::string text = v;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(',', start);
    const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!item.empty() && item[0] != '/' && !is_public_key_hex(item))
      return Status::InvalidArgument("$MLK_TRUSTED_SIGNERS: `" + item.substr(0, 80) +
                                     "` is a relative path; give the key itself (64 hex characters) or an absolute "
                                     "path to its .pub file");
    if (end == std::string::npos) break;
    start = end + 1;
  }
  auto keys = parse_trusted_keys(v);
  if (!keys.ok()) return Status::InvalidArgument("$MLK_TRUSTED_SIGNERS: " + keys.status().message());
  return keys;
}

}  // namespace mlk
