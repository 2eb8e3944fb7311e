// The one parse loop of the mlk commands, and the setters their tables use.
#include "cli/flags.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "base/decimal.h"

namespace mlk::cli {

namespace {

// Optimal string alignment distance: edits, with a swap of two neighbours
// as one (`--trails` is one from `--trials`).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// " (did you mean `--trials`?)" for a name close to one flag's; "".
std::string suggestion(const CommandSpec& spec, const std::string& name) {
  std::string best = nearest_flag(spec, name);
  return best.empty() ? "" : " (did you mean `" + best + "`?)";
}

// A flag of the table, written alone or as `--flag=VALUE`.
bool names_a_flag(const CommandSpec& spec, const std::string& arg) {
  size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
  return find_flag(spec, arg.substr(0, eq)) != nullptr;
}

// One flag at args[i] (advancing i past its value). `name` and
// `inline_value` are args[i] split at its first `=`.
Status parse_flag(const CommandSpec& spec, const std::vector<std::string>& args, size_t& i, const std::string& name,
                  const std::optional<std::string>& inline_value, ParsedFlags& seen) {
  const Flag* f = find_flag(spec, name);
  if (!f) return Status::Usage("unknown option `" + name + "`" + suggestion(spec, name));
  seen.given.push_back(f->name);
  if (f->metavar.empty()) {
    if (inline_value) return Status::Usage(name + " takes no value (given `" + args[i] + "`)");
    return f->set(name, "");
  }
  std::string value;
  if (inline_value) value = *inline_value;
  else if (i + 1 < args.size() && !names_a_flag(spec, args[i + 1])) value = args[++i];
  else return Status::Usage(name + " needs a value");
  if (value.empty()) return Status::Usage(name + " needs a non-empty value");
  return f->set(name, value);
}

// "`a`", "`a` and `b`", "`a`, `b` and `c`".
std::string and_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + ("`" + items[i] + "`");
  return out;
}

// The flag names of a form, without the "!" of required ones.
bool form_names(const Form& form, const std::string& flag) {
  for (const auto& n : form.flags)
    if (n == flag || n == "!" + flag) return true;
  return false;
}

}  // namespace

bool ParsedFlags::has(const std::string& name) const {
  return std::find(given.begin(), given.end(), name) != given.end();
}

const Flag* find_flag(const CommandSpec& spec, const std::string& name) {
  for (const auto& f : spec.flags) {
    if (f.name == name) return &f;
    for (const auto& a : f.aliases)
      if (a == name) return &f;
  }
  return nullptr;
}

std::string nearest_flag(const CommandSpec& spec, const std::string& name) {
  const size_t letters = name.size() - std::min(name.find_first_not_of('-'), name.size());
  if (letters < 3) return "";
  std::string best;
  size_t best_d = letters / 3 + 1;
  for (const auto& f : spec.flags) {
    std::vector<std::string> names = f.aliases;
    names.insert(names.begin(), f.name);
    for (const auto& n : names)
      if (size_t d = edit_distance(name, n); d < best_d) {
        best_d = d;
        best = n;
      }
  }
  return best;
}

Expected<ParsedFlags> parse_command_line(const CommandSpec& spec, const std::vector<std::string>& args) {
  ParsedFlags seen;
  if (spec.flags.empty() && !spec.positional && !args.empty()) return Status::Usage("takes no arguments");
  bool positionals_only = false;
  size_t positionals = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (positionals_only || a.size() < 2 || a[0] != '-') {
      if (!spec.positional) return Status::Usage("unexpected argument `" + a + "`");
      if (Status s = spec.positional(a); !s.ok()) return s;
      ++positionals;
      continue;
    }
    if (a == "--") {
      positionals_only = true;
      continue;
    }
    size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = a.substr(eq + 1);
    if (Status s = parse_flag(spec, args, i, a.substr(0, eq), inline_value, seen); !s.ok()) return s;
  }
  if (positionals == 0 && !spec.no_positional.empty()) return Status::Usage(spec.no_positional);
  for (const auto& f : spec.flags)
    if (f.required && !seen.has(f.name)) return Status::Usage(f.name + " " + f.metavar + " is required" + f.required_note);
  return seen;
}

Status check_subcommand_flags(const CommandSpec& spec, const std::string& sub, const ParsedFlags& seen) {
  const Form* form = nullptr;
  for (const auto& s : spec.subcommands)
    if (s.words.substr(0, s.words.find(' ')) == sub) form = &s;
  MLK_CHECK(form != nullptr, "check_subcommand_flags: not a subcommand of the spec");
  for (const auto& given : seen.given) {
    std::vector<std::string> owners;
    for (const auto& s : spec.subcommands)
      if (form_names(s, given)) owners.push_back(s.words.substr(0, s.words.find(' ')));
    if (!owners.empty() && !form_names(*form, given)) return Status::Usage(given + " belongs to " + and_list(owners));
  }
  for (const auto& n : form->flags) {
    if (n.empty() || n[0] != '!' || seen.has(n.substr(1))) continue;
    const Flag* f = find_flag(spec, n.substr(1));
    MLK_CHECK(f != nullptr, "a subcommand names a flag its spec lacks");
    return Status::Usage(sub + " needs " + f->name + " " + f->metavar + f->required_note);
  }
  return Status::Ok();
}

std::function<Status(const std::string&)> one_positional(std::string& out, std::string note) {
  return [&out, note = std::move(note)](const std::string& arg) {
    if (!out.empty()) return Status::Usage("unexpected argument `" + arg + "`" + note);
    out = arg;
    return Status::Ok();
  };
}

FlagSetter store(std::string& out) {
  return [&out](const std::string&, const std::string& value) {
    out = value;
    return Status::Ok();
  };
}

FlagSetter store(std::optional<std::string>& out) {
  return [&out](const std::string&, const std::string& value) {
    out = value;
    return Status::Ok();
  };
}

FlagSetter set_bool(bool& out, bool value) {
  return [&out, value](const std::string&, const std::string&) {
    out = value;
    return Status::Ok();
  };
}

Expected<int64_t> parse_int_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  const std::string what = min == 1 ? "a positive integer" : "a whole number >= " + std::to_string(min);
  const std::string too_large = flag + ": `" + text + "` is too large (at most " + std::to_string(max) + ")";
  bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) return Status::Usage(flag + ": `" + text + "` is not " + what);
  int64_t v;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return Status::Usage(too_large);
  if (ec != std::errc() || p != text.data() + text.size() || v < min)
    return Status::Usage(flag + ": `" + text + "` is not " + what);
  if (v > max) return Status::Usage(too_large);
  return v;
}

Expected<int64_t> parse_count(const std::string& flag, const std::string& text) {
  return parse_int_flag(flag, text, 1, std::numeric_limits<int>::max());
}

Expected<double> parse_seconds(const std::string& flag, const std::string& text) {
  auto v = parse_plain_decimal(text, 1);
  if (!v) return Status::Usage(flag + ": `" + text + "` is not a number of seconds (digits and at most one point, e.g. 0.5)");
  return *v;
}

FlagSetter store_seconds(double& out) {
  return [&out](const std::string& flag, const std::string& value) -> Status {
    auto v = parse_seconds(flag, value);
    if (!v.ok()) return v.status();
    out = *v;
    return Status::Ok();
  };
}

Flag cache_flag(std::string& out, CacheFlag kind) {
  return {.name = "--cache",
          .metavar = "PATH",
          .help = kind == CacheFlag::kStoreFile
                      ? "the store: a SQLite file (not a `mlk serve` URL)"
                      : "the artifact cache: a store file, or the URL of a `mlk serve` (http://HOST:PORT); with a "
                        "URL the command works on a local mirror ($MLK_LOCAL_CACHE, else the default store path) "
                        "that pulls the keys it lacks from the server",
          .default_value = "$MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db, else ~/.cache/mlk/cache.db",
          .set = store(out)};
}

}  // namespace mlk::cli
