// TOML files as command lines (cli/config_file.h), read with toml++.
#include "cli/config_file.h"

#include <toml++/toml.h>

#include "base/files.h"

namespace mlk::cli {

namespace {

std::string where(const std::string& path, const toml::source_region& at) {
  return path + ":" + std::to_string(at.begin.line) + ":" + std::to_string(at.begin.column) + ": ";
}

std::string type_name(const toml::node& v) {
  switch (v.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}

// A flag value written as a TOML string or integer; nullopt for other types.
std::optional<std::string> scalar_text(const toml::node& v) {
  if (auto s = v.value_exact<std::string>()) return *s;
  if (auto i = v.value_exact<int64_t>()) return std::to_string(*i);
  return std::nullopt;
}

// What reads the file for one flag: each value goes through the flag's setter,
// and every error is prefixed with the position of what it is about.
struct Applier {
  const std::string& path;
  const Flag& flag;
  const std::string key;

  Status fail(const toml::source_region& at, const std::string& message) const {
    return Status::Usage(where(path, at) + message);
  }

  Status set(const toml::node& at, const std::string& value) const {
    if (value.empty()) return fail(at.source(), key + " needs a non-empty value");
    Status s = flag.set(flag.name, value);
    return s.ok() ? s : fail(at.source(), s.message());
  }

  Status scalar(const toml::node& v) const {
    auto text = scalar_text(v);
    if (!text) return fail(v.source(), key + " takes " + flag.metavar + ", a string or an integer, not " + type_name(v));
    return set(v, *text);
  }

  // `[quota] vision = "50G"` -> --quota vision=50G; an array value of a
  // NAME=LIST flag is joined with commas.
  Status table(const toml::table& t) const {
    for (auto&& [name, v] : t) {
      std::string text;
      if (const toml::array* list = v.as_array()) {
        for (const toml::node& item : *list) {
          auto one = scalar_text(item);
          if (!one) return fail(item.source(), key + "." + std::string(name.str()) + ": each item is a string, not " + type_name(item));
          text += (text.empty() ? "" : ",") + *one;
        }
      } else if (auto one = scalar_text(v)) {
        text = *one;
      } else {
        return fail(v.source(), key + "." + std::string(name.str()) + " is a string or an array of strings, not " + type_name(v));
      }
      if (Status s = set(v, std::string(name.str()) + "=" + text); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status apply(const toml::node& v) const {
    if (flag.metavar.empty()) {
      auto on = v.value_exact<bool>();
      if (!on) return fail(v.source(), key + " is a switch: give true or false, not " + type_name(v));
      return *on ? flag.set(flag.name, "") : Status::Ok();
    }
    if (!flag.repeatable && (v.is_array() || v.is_table()))
      return fail(v.source(), key + " takes one " + flag.metavar + ", not " + type_name(v));
    if (const toml::array* list = v.as_array()) {
      for (const toml::node& item : *list)
        if (Status s = scalar(item); !s.ok()) return s;
      return Status::Ok();
    }
    if (const toml::table* t = v.as_table()) {
      if (flag.metavar.find('=') == std::string::npos)
        return fail(v.source(), key + " takes " + flag.metavar + " values, not a table");
      return table(*t);
    }
    return scalar(v);
  }
};

}  // namespace

Status apply_config_file(const CommandSpec& spec, const std::string& path, const std::set<std::string>& skip,
                         const std::set<std::string>& refused) {
  auto text = read_file(path);
  if (!text.ok()) return Status::Usage("--config: " + text.status().message());
  toml::table doc;
  try {
    doc = toml::parse(*text, path);
  } catch (const toml::parse_error& e) {
    return Status::Usage(where(path, e.source()) + std::string(e.description()));
  }
  for (auto&& [k, v] : doc) {
    const std::string key(k.str());
    const Flag* flag = key.rfind('-', 0) == 0 ? nullptr : find_flag(spec, "--" + key);
    if (flag == nullptr) {
      std::string near = nearest_flag(spec, "--" + key);
      if (!near.empty()) near = " (did you mean `" + near.substr(near.find_first_not_of('-')) + "`?)";
      return Status::Usage(where(path, k.source()) + "unknown key `" + key + "` for `mlk " + spec.name + "`" + near);
    }
    if (flag->name == "--config") return Status::Usage(where(path, k.source()) + "a config file cannot name another one");
    if (refused.count(flag->name))
      return Status::Usage(where(path, k.source()) + "`" + key + "` is an action of the command line, not a setting");
    if (skip.count(flag->name)) continue;  // the command line gives it
    if (Status s = Applier{path, *flag, key}.apply(v); !s.ok()) return s;
  }
  return Status::Ok();
}

Expected<std::optional<std::string>> config_flag_value(const std::vector<std::string>& args) {
  std::optional<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    std::optional<std::string> value;
    if (args[i] == "--config") {
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) return Status::Usage("--config needs a value");
      value = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      value = args[i].substr(9);
    } else {
      continue;
    }
    if (value->empty()) return Status::Usage("--config needs a non-empty value");
    if (out) return Status::Usage("--config is given twice (`" + *out + "` and `" + *value + "`); give one file");
    out = value;
  }
  return out;
}

}  // namespace mlk::cli
