// The flags of the mlk commands as data: one CommandSpec per command, from
// which one parse loop (parse_command_line), the `mlk NAME --help` text and
// docs/cli.md (`mlk help --markdown`, cli/usage.h) are all made, so that
// they cannot drift apart. A command's spec is built by a function of the
// options struct it fills: each Flag's setter writes into that struct.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace mlk::cli {

// Receives one occurrence of a flag: its name as the table spells it (for
// messages) and its value ("" for a switch). A bad value is a usage error
// whose message names the flag and the value.
using FlagSetter = std::function<Status(const std::string& flag, const std::string& value)>;

struct Flag {
  std::string name;           // "--fn" or "-o"
  std::string metavar;        // "NAME"; empty: a switch, which takes no value
  std::string help;           // one paragraph; wrapped when printed
  std::string default_value;  // shown as "(default: ...)" after the help; empty: none shown
  FlagSetter set;             // called for every occurrence, in order (so the last one wins)
  std::vector<std::string> aliases = {};  // other spellings: "--quiet" for "-q"
  // Refused when missing, with "NAME METAVAR is required" and this note
  // (e.g. " (see `mlk targets`)"); shown without brackets in the synopsis.
  bool required = false;
  std::string required_note = {};
  bool repeatable = false;  // shown as "[--quota TEAM=SIZE]..." in the synopsis
};

// One line of the synopsis, or one subcommand: words ("create",
// "FILE.tl...") then flags by name; "!--team" is required in this form and
// "..." stands for "[OPTIONS]". `help` (subcommands only) is their line in
// the "commands:" list.
struct Form {
  std::string words;
  std::vector<std::string> flags = {};
  std::string help = {};
};

struct CommandSpec {
  std::string name;         // "run"
  std::string summary;      // one line for `mlk --help`
  std::string positionals;  // the synopsis words before the flags: "FILE.tl"
  // Synopsis lines; empty: one per subcommand (its flags, then the common
  // ones), or with no subcommands one from `positionals` and every flag.
  std::vector<Form> forms;
  std::string description;  // preformatted paragraphs after the synopsis
  // Subcommands (`mlk cache gc ...`): the "commands:" list, and which flags
  // belong to which (check_subcommand_flags). Flags no subcommand names are
  // common to all of them.
  std::vector<Form> subcommands;
  std::string flags_heading;  // a line above the flags ("options:"); empty: none
  std::vector<Flag> flags;
  std::string epilogue;  // preformatted paragraphs after the flags
  // Called for each argument that is not a flag, in order; null: the command
  // takes none ("unexpected argument `X`").
  std::function<Status(const std::string& arg)> positional;
  // The usage error when no positional argument is given ("no input file");
  // empty: none is needed. Checked after the flags, before required flags.
  std::string no_positional = {};
};

// What parse_command_line saw: the flags given (by table name), in order.
struct ParsedFlags {
  std::vector<std::string> given;
  bool has(const std::string& name) const;
};

// Walks `args` by `spec`. A flag that takes a value accepts `--flag VALUE`
// and `--flag=VALUE`; its value may start with `-` (`--time -5` is a bad
// number, not a missing value), but not be another flag of the table. After
// `--` every argument is positional; `-` alone is positional. Usage errors,
// in the words the messages use:
//   unknown option `--trails` (did you mean `--trials`?)
//   --fn needs a value
//   --cache needs a non-empty value
//   --no-cache takes no value (given `--no-cache=1`)
//   no input file                                   (spec.no_positional)
//   --target PROFILE is required (see `mlk targets`)
//   unexpected argument `b.tl`                      (no spec.positional)
//   takes no arguments                              (no flags, no positional)
// and whatever a setter or `spec.positional` returns.
Expected<ParsedFlags> parse_command_line(const CommandSpec& spec, const std::vector<std::string>& args);

// The subcommand `sub` (one of spec.subcommands) given the flags `seen`: a
// flag that belongs to other subcommands only ("--max-size belongs to
// `gc`"), or a flag `sub` requires that is missing ("gc needs --max-size
// SIZE (e.g. 10G)", with the flag's required_note), is a usage error.
Status check_subcommand_flags(const CommandSpec& spec, const std::string& sub, const ParsedFlags& seen);

// The flag of `spec` named `name` (or by one of its aliases); null if none.
const Flag* find_flag(const CommandSpec& spec, const std::string& name);

// The flag name (or alias) of `spec` closest to the unknown `name`, for
// "did you mean": within a third of the name's letters, and only for names
// of three letters or more; "" when none is that close.
std::string nearest_flag(const CommandSpec& spec, const std::string& name);

// --- Setters for the common kinds of value -----------------------------------

// A command's one positional argument (CommandSpec::positional): the first
// is stored in `out`, another is "unexpected argument `X`" and `note`.
std::function<Status(const std::string&)> one_positional(std::string& out, std::string note = "");

FlagSetter store(std::string& out);
FlagSetter store(std::optional<std::string>& out);
// A switch: sets `out` to `value`.
FlagSetter set_bool(bool& out, bool value = true);

// A whole-number flag value from `min` to `max`, e.g. --repeat 10. A usage
// error names the flag and the value: not a positive integer (or, with min 0,
// not a whole number >= 0): signs, fractions, letters, or below min; or too
// large: above max, including values beyond 64 bits.
Expected<int64_t> parse_int_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max);

// A positive integer flag value up to INT_MAX (what every count, seed and
// number of seconds of the commands fits in), e.g. --trials 40.
Expected<int64_t> parse_count(const std::string& flag, const std::string& text);

// A number of seconds written as decimal digits with at most one point
// (30, 0.2), e.g. --poll 0.2; anything else (signs, exponents, inf, nan,
// hex) is a usage error naming the flag and the value. Ranges are the
// command's to check.
Expected<double> parse_seconds(const std::string& flag, const std::string& text);
FlagSetter store_seconds(double& out);

// parse_count into `out` (an integer or floating type).
template <class T>
FlagSetter store_count(T& out) {
  return [&out](const std::string& flag, const std::string& value) -> Status {
    auto n = parse_count(flag, value);
    if (!n.ok()) return n.status();
    out = static_cast<T>(*n);
    return Status::Ok();
  };
}

// --- Flags shared by several commands ----------------------------------------

// What a command's --cache may name: only a store file (the commands that
// own the store: `mlk cache`, `mlk serve`, `mlk token`), or also the URL of
// a `mlk serve`, worked on through a local mirror (the commands that open the
// cache with client::CliCache, client/cli_cache.h: run, build, tune, verify,
// bench).
enum class CacheFlag { kStoreFile, kStoreOrServer };

// `--cache PATH`, the same in every command that uses the artifact store:
// its value stored in `out` as given ("" when absent; the command resolves
// the default, cache::default_store_path). One help text per CacheFlag.
Flag cache_flag(std::string& out, CacheFlag kind);

}  // namespace mlk::cli
