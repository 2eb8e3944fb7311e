// `mlk signature`: the C declarations of every public fn of a program, as a
// snapshot a CI job keeps; --check compares the program with one and names
// what changed (lang/c_declarations.h).
#include <cstdio>

#include "lang/c_declarations.h"
#include "base/files.h"
#include "cli/args.h"
#include "cli/command.h"
#include "lang/frontend.h"

namespace mlk::cli {

namespace {

struct SignatureArgs {
  std::string file, check;
};

CommandSpec spec(SignatureArgs& a) {
  return {
      .name = "signature",
      .summary = "print or check the signatures and C ABI of a program's public fns",
      .positionals = "FILE.tl",
      .description =
          "Prints, for every public fn of FILE.tl in source order, what a caller of its\n"
          "artifact relies on: the signature with symbolic shapes and refinements, each\n"
          "argument's index, name, dtype and shape, the results, the order of the `dims`\n"
          "array, and the C prototype of its entry (the declarations of the <fn>.h that\n"
          "`mlk build` writes). Keep the output as a snapshot (`mlk signature FILE.tl >\n"
          "FILE.abi`); --check SNAPSHOT compares the program with it and names each fn\n"
          "that changed, is new or was removed, with the lines that differ.\n"
          "Exit status: 0 printed, or the snapshot matches; 1 a change (--check), or a\n"
          "bad program or unreadable file; 2 bad usage; 3 an internal error.\n",
      .flags = {{.name = "--check", .metavar = "SNAPSHOT",
                 .help = "compare the program with a snapshot (the output of an earlier `mlk signature`) "
                         "instead of printing",
                 .set = store(a.check)}},
      .positional = one_positional(a.file, "(one program at a time)"),
      .no_positional = "no input file",
  };
}

}  // namespace

CommandSpec signature_spec() {
  static SignatureArgs scratch;
  return spec(scratch);
}

int run_signature(const std::vector<std::string>& args) {
  SignatureArgs a;
  if (int bad = parse_or_usage_error(spec(a), args)) return bad;
  auto fe = compile_file(a.file);
  if (!fe.ok()) {
    std::fprintf(stderr, "mlk signature: %s\n", fe.status().message().c_str());
    return 1;
  }
  if (!fe->ok()) {
    std::fputs(fe->rendered().c_str(), stderr);
    return 1;
  }
  const std::string now = signature_snapshot(fe->module);
  if (a.check.empty()) {
    std::fputs(now.c_str(), stdout);
    return 0;
  }
  auto before = read_file(a.check);
  if (!before.ok()) {
    std::fprintf(stderr, "mlk signature: --check: %s\n", before.status().message().c_str());
    return 1;
  }
  const std::string changes = snapshot_changes(*before, now);
  if (changes.empty()) {
    std::printf("%s: the public fns' signatures and C ABI match %s\n", a.file.c_str(), a.check.c_str());
    return 0;
  }
  std::fprintf(stderr, "mlk signature: %s differs from the snapshot %s:\n%s(if the change is meant, write the "
               "snapshot again: mlk signature %s > %s)\n",
               a.file.c_str(), a.check.c_str(), changes.c_str(), a.file.c_str(), a.check.c_str());
  return 1;
}

}  // namespace mlk::cli
