// Ed25519 keys and signatures through OpenSSL 3 (EVP): the one place mlk
// signs or checks a signature. Halide-free; OpenSSL types stay in
// signing.cpp. docs/signing.md says what mlk signs with these.
//
// Encodings (all lower-case hex):
//   public key  64 hex characters: the raw 32-byte Ed25519 public key
//   key id      16 hex characters: the first 8 bytes of sha256(raw public key)
//   signature   128 hex characters: the raw 64-byte Ed25519 signature
// A private key file is PEM PKCS#8 ("-----BEGIN PRIVATE KEY-----").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace mlk {

// A private Ed25519 key, with its public half.
struct SigningKey {
  std::shared_ptr<evp_pkey_st> pkey;  // never null in a key returned by the functions below
  std::string public_key;             // 64 hex
  std::string key_id;                 // 16 hex
};

// A fresh key (EVP_PKEY_Q_keygen). Internal when OpenSSL cannot make one.
Expected<SigningKey> create_signing_key();

// The PEM PKCS#8 text of the private key.
Expected<std::string> private_key_pem(const SigningKey& key);

// Writes the private key to `path` as PEM, mode 0600, refusing to replace an
// existing file (IOError naming the path).
Status write_private_key(const std::string& path, const SigningKey& key);

// Reads a PEM private key. InvalidArgument naming `path` when it is not an
// Ed25519 private key; IOError when it cannot be read.
Expected<SigningKey> load_signing_key(const std::string& path);

// The Ed25519 signature of `bytes` (one-shot EVP_DigestSign), 128 hex.
Expected<std::string> sign_bytes(const SigningKey& key, std::string_view bytes);

// OK when `sig_hex` is a valid signature of `bytes` by `public_key_hex`;
// InvalidArgument saying which is malformed or that it does not verify.
Status verify_signature(const std::string& public_key_hex, std::string_view bytes, const std::string& sig_hex);

bool is_public_key_hex(std::string_view s);  // 64 lower-case hex characters
std::string key_id_of(const std::string& public_key_hex);

// A trust list: comma-separated items, each a public key (64 hex) or the
// path of a file holding one (the KEY.pub that `mlk key create` writes; its
// first word). Returns the public keys, deduplicated, in order.
// InvalidArgument naming the item that is neither.
Expected<std::vector<std::string>> parse_trusted_keys(const std::string& text);

// The trust list a loader uses when its caller names none: the environment
// variable MLK_TRUSTED_SIGNERS, in parse_trusted_keys' form, so that an
// operator makes signed the default for every runtime of a machine or a
// container (the C ABI, mlk.load, mlk.load_model, mlk run, mlk bench).
// Empty when unset or empty; InvalidArgument naming the variable otherwise.
Expected<std::vector<std::string>> default_trusted_signers();

}  // namespace mlk
