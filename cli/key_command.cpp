// `mlk key`: Ed25519 signing keys (base/signing.h) for `--sign KEYFILE` on
// tune, build, verify and cache push, and the public keys that trust lists
// (`mlk serve --trusted-signers`, the runtime's `require=signed:KEYS`) hold.
// docs/signing.md.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/signing.h"
#include "cli/command.h"
#include "cli/flags.h"

namespace mlk::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk key: %s\n", s.message().c_str());
  return s.exit_code();
}

struct KeyArgs {
  std::string sub, file;
};

CommandSpec spec(KeyArgs& a) {
  return {
      .name = "key",
      .summary = "create Ed25519 signing keys and show their public keys",
      .description =
          "Creates and shows the Ed25519 keys that sign artifacts (`--sign KEYFILE` on tune,\n"
          "build, verify and cache push). `create KEYFILE` writes the private key (PEM PKCS#8,\n"
          "mode 0600, never over an existing file) and KEYFILE.pub, and prints the public key\n"
          "(64 hex characters) and its key id; trust lists hold public keys or .pub files.\n"
          "See docs/signing.md.\n",
      .subcommands = {{"create KEYFILE", {}, "a new key: KEYFILE (private, 0600) and KEYFILE.pub"},
                      {"show KEYFILE", {}, "the public key and key id of a private key file"}},
      .flags = {},
      .epilogue = "Keep KEYFILE private; hand out KEYFILE.pub.\n",
      .positional =
          [&a](const std::string& arg) {
            if (a.sub.empty()) a.sub = arg;
            else if (a.file.empty()) a.file = arg;
            else return Status::Usage("unexpected argument `" + arg + "`");
            return Status::Ok();
          },
  };
}

}  // namespace

CommandSpec key_spec() {
  static KeyArgs scratch;
  return spec(scratch);
}

int run_key(const std::vector<std::string>& args) {
  KeyArgs a;
  if (int bad = parse_or_usage_error(spec(a), args)) return bad;
  if (a.sub != "create" && a.sub != "show")
    return usage_error("key", a.sub.empty() ? "no command (create, show)" : "unknown command `" + a.sub + "`");
  if (a.file.empty()) return usage_error("key", a.sub + ": KEYFILE is missing");
  Expected<SigningKey> key = Status::Internal("unset");
  if (a.sub == "create") {
    struct stat st {};  // (an existing key file is refused below, with its own words)
    if (::lstat(a.file.c_str(), &st) != 0 && ::lstat((a.file + ".pub").c_str(), &st) == 0)
      return fail(Status::InvalidArgument(a.file + ".pub already exists; remove it or choose another KEYFILE"));
    key = create_signing_key();
    if (!key.ok()) return fail(key.status());
    if (Status s = write_private_key(a.file, *key); !s.ok()) return fail(s);
    // Made anew like the private key, never written into a file another
    // user made first (review 10 of issue 49).
    if (Status s = write_new_file(a.file + ".pub", key->public_key + "\n"); !s.ok()) return fail(s);
    std::printf("private key: %s (keep it private)\npublic key file: %s.pub\n", a.file.c_str(), a.file.c_str());
  } else {
    key = load_signing_key(a.file);
    if (!key.ok()) return fail(key.status());
  }
  std::printf("public key: %s\nkey id: %s\n", key->public_key.c_str(), key->key_id.c_str());
  return 0;
}

}  // namespace mlk::cli
