// Help text and markdown from the commands' flag tables.
#include "cli/usage.h"

#include <algorithm>
#include <sstream>

namespace mlk::cli {

namespace {

// The longest left column (flag and metavar) that still has its help on the
// same line; longer ones put the help on the next.
constexpr size_t kMaxLeft = 22;

// `text` wrapped to kHelpWidth: the first line continues `line` (already
// `line.size()` columns), the others start at column `indent`.
std::string wrap(std::string line, const std::string& text, size_t indent) {
  std::string out;
  std::istringstream words(text);
  std::string w;
  bool first = true;
  while (words >> w) {
    if (!first && line.size() + 1 + w.size() > kHelpWidth) {
      out += line + "\n";
      line = std::string(indent, ' ');
      first = true;
    }
    line += (first ? "" : " ") + w;
    first = false;
  }
  return out + line + "\n";
}

// How a form shows one flag: "--inputs IN.safetensors", "[--fn NAME]",
// "[--quota TEAM=SIZE]...", "[-q]"; "..." is "[OPTIONS]".
std::string flag_token(const CommandSpec& spec, const std::string& ref) {
  if (ref == "...") return "[OPTIONS]";
  const bool required = !ref.empty() && ref[0] == '!';
  const Flag* f = find_flag(spec, required ? ref.substr(1) : ref);
  MLK_CHECK(f != nullptr, "a form names a flag its spec lacks");
  std::string t = f->name + (f->metavar.empty() ? "" : " " + f->metavar);
  if (!required) t = "[" + t + "]";
  return f->repeatable ? t + "..." : t;
}

// One form: its words, then its flags, each an unbreakable token.
std::vector<std::string> form_tokens(const CommandSpec& spec, const Form& form) {
  std::vector<std::string> tokens;
  if (!form.words.empty()) tokens.push_back(form.words);
  for (const auto& ref : form.flags) tokens.push_back(flag_token(spec, ref));
  return tokens;
}

// The forms of the synopsis: the given ones; else one per subcommand, with
// its flags and then the common ones; else one of every flag.
std::vector<Form> synopsis_forms(const CommandSpec& spec) {
  if (!spec.forms.empty()) return spec.forms;
  std::vector<std::string> common;
  for (const auto& f : spec.flags) {
    bool owned = false;
    for (const auto& s : spec.subcommands)
      for (const auto& n : s.flags) owned = owned || n == f.name || n == "!" + f.name;
    if (!owned) common.push_back((f.required ? "!" : "") + f.name);
  }
  if (spec.subcommands.empty()) return {Form{spec.positionals, common}};
  std::vector<Form> forms;
  for (const auto& s : spec.subcommands) {
    forms.push_back(Form{s.words, s.flags});
    forms.back().flags.insert(forms.back().flags.end(), common.begin(), common.end());
  }
  return forms;
}

// Two columns: `left` then `help`, wrapped, under column `col`.
std::string two_columns(const std::string& left, const std::string& help, size_t col) {
  std::string line = "  " + left;
  if (help.empty()) return line + "\n";
  if (line.size() + 1 > col) return line + "\n" + wrap(std::string(col, ' '), help, col);
  return wrap(line + std::string(col - line.size(), ' '), help, col);
}

// The column where the help of `lefts` starts.
size_t help_column(const std::vector<std::string>& lefts) {
  size_t w = 0;
  for (const auto& l : lefts)
    if (l.size() <= kMaxLeft) w = std::max(w, l.size());
  return 2 + w + 2;
}

std::string flags_list(const CommandSpec& spec) {
  std::vector<std::string> lefts;
  for (const auto& f : spec.flags) {
    std::string l = f.name;
    for (const auto& a : f.aliases) l += ", " + a;
    lefts.push_back(l + (f.metavar.empty() ? "" : " " + f.metavar));
  }
  const size_t col = help_column(lefts);
  std::string out;
  for (size_t i = 0; i < spec.flags.size(); ++i) {
    const Flag& f = spec.flags[i];
    out += two_columns(lefts[i], f.help + (f.default_value.empty() ? "" : " (default: " + f.default_value + ")"), col);
  }
  return out;
}

std::string subcommands_list(const CommandSpec& spec) {
  std::vector<std::string> lefts;
  for (const auto& s : spec.subcommands) {
    std::string l;
    for (const auto& t : form_tokens(spec, s)) l += (l.empty() ? "" : " ") + t;
    lefts.push_back(l);
  }
  const size_t col = help_column(lefts);
  std::string out = "commands:\n";
  for (size_t i = 0; i < lefts.size(); ++i) out += two_columns(lefts[i], spec.subcommands[i].help, col);
  return out;
}

// Sections joined by one empty line.
std::string join_sections(const std::vector<std::string>& sections) {
  std::string out;
  for (const auto& s : sections) {
    if (s.empty()) continue;
    out += (out.empty() ? "" : "\n") + s + (s.back() == '\n' ? "" : "\n");
  }
  return out;
}

}  // namespace

std::string synopsis(const CommandSpec& spec) {
  std::string out;
  const std::string lead = "mlk " + spec.name + " ";
  bool first = true;
  for (const auto& form : synopsis_forms(spec)) {
    std::string line = (first ? "usage: " : "       ") + lead;
    const size_t indent = line.size();
    bool empty = true;
    for (const auto& t : form_tokens(spec, form)) {
      if (!empty && line.size() + 1 + t.size() > kHelpWidth) {
        out += line + "\n";
        line = std::string(indent, ' ');
        empty = true;
      }
      line += (empty ? "" : " ") + t;
      empty = false;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    first = false;
  }
  return out;
}

std::string usage_text(const CommandSpec& spec) {
  std::string flags = spec.flags.empty() ? "" : (spec.flags_heading.empty() ? "" : spec.flags_heading + "\n") + flags_list(spec);
  return join_sections({synopsis(spec), spec.description, spec.subcommands.empty() ? "" : subcommands_list(spec), flags,
                        spec.epilogue});
}

std::string main_help(const std::vector<CommandSpec>& specs) {
  std::string out =
      "usage: mlk COMMAND [ARGS...]\n"
      "\n"
      "mlk compiles typed tensor programs (.tl) to tuned kernels.\n"
      "\n"
      "commands:\n";
  for (const auto& s : specs) {
    std::string name = s.name;
    out += "  " + name + std::string(name.size() < 10 ? 10 - name.size() : 0, ' ') + " " + s.summary + "\n";
  }
  out +=
      "\n"
      "`mlk COMMAND --help` describes one command. Exit status: 0 success,\n"
      "1 bad program or input, 2 bad usage, 3 internal error (a bug in mlk).\n"
      "`mlk help --bash`, `--zsh` and `--man` print shell completion and the man page.\n";
  return out;
}

std::string markdown(const std::vector<CommandSpec>& specs) {
  auto block = [](const std::string& what, const std::string& text) {
    return "<!-- BEGIN GENERATED: " + what + " (from the flag tables in cli/; scripts/sync_cli_docs.py) -->\n```\n" +
           text + "```\n<!-- END GENERATED -->\n";
  };
  std::string out = block("mlk --help", main_help(specs));
  for (const auto& s : specs) out += "\n" + block("mlk " + s.name + " --help", usage_text(s));
  return out;
}

}  // namespace mlk::cli
