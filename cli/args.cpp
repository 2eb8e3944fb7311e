#include "cli/args.h"

#include "client/cli_cache.h"
#include "lang/bind.h"

namespace mlk::cli {

Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text) {
  auto d = parse_dim_list(text);
  if (!d.ok()) return Status::Usage("--dims: " + d.status().message());
  return *d;
}

FlagSetter store_dims(std::map<std::string, int64_t>& out) {
  return [&out](const std::string&, const std::string& value) -> Status {
    auto d = parse_dims(value);
    if (!d.ok()) return d.status();
    out = *d;
    return Status::Ok();
  };
}

Flag precision_flag(Precision& out) {
  return {.name = "--precision",
          .metavar = "P",
          .help = "the products' precision policy: f32 (as written), bf16 or f16 (every F32 matmul's operands "
                  "rounded to BF16 or F16, products and sums in F32, the result F32; other ops, parameters and "
                  "results keep their dtypes). bf16 uses the CPU's BF16 products where the target has them: AMX "
                  "tiles (Sapphire Rapids-class), the dot product vdpbf16ps (AMD Zen 4, Zen 5). A fn under a policy hashes otherwise, so its artifacts have cache keys of their own",
          .default_value = "f32",
          .set = [&out](const std::string& flag, const std::string& value) -> Status {
            auto p = parse_precision(value);
            if (!p.ok()) return Status::Usage(flag + ": " + p.status().message());
            out = *p;
            return Status::Ok();
          }};
}

Flag namespaces_flag(std::string& out) {
  return {.name = "--namespaces",
          .metavar = "LIST",
          .help = "with a cache server: the namespaces a missing artifact is read from, in order, e.g. "
                  "own,shared-release. `own` (required) is the team's own namespace (--namespace), where pushes "
                  "always go; the others are namespaces another team granted this one read access to (`mlk token "
                  "grant`). One that refuses the token (no grant, or a revoked one) is a warning naming it, and "
                  "the next is read. An error with a local store, which has no grants",
          .default_value = "$MLK_NAMESPACES, else own",
          .set = [&out](const std::string& flag, const std::string& value) -> Status {
            if (Status v = client::check_read_order(value); !v.ok()) return Status::Usage(flag + ": " + v.message());
            out = value;
            return Status::Ok();
          }};
}

}  // namespace mlk::cli
