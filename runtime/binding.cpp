#include "runtime/binding.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include "base/json.h"

namespace mlk::rt {

using nlohmann::json;

namespace {

// Errors of one binding file: "FILE: WHAT".
struct Where {
  const std::string& file;
  Status operator()(const std::string& what) const { return Status::InvalidArgument(file + ": " + what); }
};

Status only_fields(const Where& err, const json& o, const std::set<std::string>& allowed, const std::string& what) {
  for (const auto& [k, v] : o.items()) {
    if (allowed.count(k)) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return err(what + " has an unknown field `" + k + "` (the fields are " + list + ")");
  }
  return Status::Ok();
}

std::string param_list(const ir::Function& f) {
  std::string s;
  for (const auto& p : f.params) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

const ir::Param* find_param(const ir::Function& f, const std::string& name) {
  for (const auto& p : f.params)
    if (p.name == name) return &p;
  return nullptr;
}

// A key template has no braces except `{i}`.
Status check_template(const Where& err, const std::string& at, const std::string& key, bool repeated) {
  if (key.empty()) return err(at + ": the key is empty");
  std::string rest = key;
  bool has_i = false;
  for (size_t p; (p = rest.find("{i}")) != std::string::npos;) {
    rest.erase(p, 3);
    has_i = true;
  }
  if (rest.find_first_of("{}") != std::string::npos)
    return err(at + ": key `" + key + "` has braces other than `{i}` (the instance of a repeated step)");
  if (has_i && !repeated)
    return err(at + ": key `" + key + "` has `{i}`, but the step has no \"repeat\"; `{i}` is the instance of a repeated step");
  return Status::Ok();
}

Expected<std::vector<ModelInput>> parse_inputs(const Where& err, const json& j) {
  if (!j.is_array() || j.empty()) return err("\"inputs\" must be a non-empty list of {\"name\": ...}");
  std::vector<ModelInput> out;
  std::set<std::string> names;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& o = j[i];
    const std::string at = "input " + std::to_string(i);
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string() || o["name"].get<std::string>().empty())
      return err(at + " must be an object with a non-empty string \"name\"");
    MLK_RETURN_IF_ERROR(only_fields(err, o, {"name", "zeros_like"}, at));
    ModelInput in{o["name"].get<std::string>(), ""};
    if (!names.insert(in.name).second) return err(at + ": input `" + in.name + "` is listed twice");
    if (o.contains("zeros_like")) {
      if (!o["zeros_like"].is_string()) return err(at + " (`" + in.name + "`): \"zeros_like\" must name an input");
      in.zeros_like = o["zeros_like"].get<std::string>();
      bool required_before = false;
      for (const auto& p : out) required_before = required_before || (p.name == in.zeros_like && p.zeros_like.empty());
      if (!required_before)
        return err(at + " (`" + in.name + "`): \"zeros_like\" names `" + in.zeros_like +
                   "`, which is not a required input listed before it");
    }
    out.push_back(std::move(in));
  }
  return out;
}

// The parameter sources of one step; `defined` holds the values defined so far.
Status parse_sources(const Where& err, const std::string& at, const json& o, const ir::Function& f, BindingStep& s,
                     const std::set<std::string>& defined) {
  std::map<std::string, std::string> bound_by;  // parameter -> field
  for (const char* field : {"args", "weights", "constants"}) {
    if (!o.contains(field)) continue;
    if (!o[field].is_object()) return err(at + ": \"" + field + "\" must be an object of parameter -> source");
    for (const auto& [name, v] : o[field].items()) {
      const ir::Param* p = find_param(f, name);
      if (!p) return err(at + ": `" + f.name + "` has no parameter `" + name + "` (its parameters: " + param_list(f) + ")");
      if (auto it = bound_by.find(name); it != bound_by.end())
        return err(at + ": parameter `" + name + "` is bound twice, under \"" + it->second + "\" and \"" + field + "\"");
      bound_by[name] = field;
      const std::string pat = at + ", parameter `" + name + "`";
      if (std::string(field) == "args") {
        if (!v.is_string()) return err(pat + ": an argument must name a model input or an earlier step's \"out\"");
        const std::string value = v.get<std::string>();
        if (!defined.count(value))
          return err(pat + ": `" + value + "` is neither a model input nor the \"out\" of an earlier step");
        s.args[name] = value;
      } else if (std::string(field) == "weights") {
        if (!v.is_string()) return err(pat + ": a weight must be a key of the weights file");
        MLK_RETURN_IF_ERROR(check_template(err, pat, v.get<std::string>(), s.repeat > 1 || o.contains("repeat")));
        s.weights[name] = v.get<std::string>();
      } else {
        if (!p->type.shape.empty())
          return err(pat + " is " + p->type.str() + "; a constant binds only a Scalar parameter");
        if (!v.is_number()) return err(pat + ": a constant must be a number");
        const double c = v.get<double>();
        if (p->type.dtype == DType::Bool || !literal_fits(p->type.dtype, c, std::floor(c) == c && v.is_number_integer()))
          return err(pat + ": the constant " + v.dump() + " is not a " + dtype_name(p->type.dtype) + " value");
        s.constants[name] = c;
      }
    }
  }
  for (const auto& p : f.params)
    if (!bound_by.count(p.name))
      return err(at + ": parameter `" + p.name + "` of `" + f.name + "` is bound by nothing; bind it under \"args\", "
                 "\"weights\" or \"constants\"");
  return Status::Ok();
}

Expected<BindingStep> parse_step(const Where& err, size_t index, const json& o, const ir::Module& module,
                                 const std::set<std::string>& defined) {
  const std::string at0 = "step " + std::to_string(index);
  if (!o.is_object() || !o.contains("fn") || !o["fn"].is_string())
    return err(at0 + " must be an object with a string \"fn\"");
  BindingStep s;
  s.fn = o["fn"].get<std::string>();
  const std::string at = s.where(index);
  MLK_RETURN_IF_ERROR(only_fields(err, o, {"about", "fn", "repeat", "dims", "args", "weights", "constants", "out"}, at));
  const ir::Function* f = module.find(s.fn);
  if (!f) return err(at + ": the program has no fn `" + s.fn + "`");
  if (!f->is_public) return err(at + ": `" + s.fn + "` is not public; a step runs a public fn");
  if (o.contains("repeat")) {
    if (!o["repeat"].is_number_integer() || o["repeat"].get<int64_t>() < 1 || o["repeat"].get<int64_t>() > 100000)
      return err(at + ": \"repeat\" must be a whole number in [1, 100000]");
    s.repeat = static_cast<int>(o["repeat"].get<int64_t>());
  }
  if (o.contains("dims")) {
    if (!o["dims"].is_object()) return err(at + ": \"dims\" must be an object of dimension -> value");
    for (const auto& [d, v] : o["dims"].items()) {
      bool known = false;
      for (const auto& x : f->dim_vars) known = known || x == d;
      if (!known) return err(at + ": `" + s.fn + "` has no dimension `" + d + "`");
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxExtent)
        return err(at + ": dimension `" + d + "` must be a whole number in [1, 2147483647]");
      s.dims[d] = v.get<int64_t>();
    }
  }
  MLK_RETURN_IF_ERROR(parse_sources(err, at, o, *f, s, defined));
  if (!o.contains("out") || !o["out"].is_string() || o["out"].get<std::string>().empty())
    return err(at + ": \"out\" must name the step's result");
  s.out = o["out"].get<std::string>();
  return s;
}

}  // namespace

std::string BindingStep::where(size_t index) const { return "step " + std::to_string(index) + " (`" + fn + "`)"; }

std::string weight_key(const std::string& key_template, int i) {
  std::string k = key_template;
  for (size_t p; (p = k.find("{i}")) != std::string::npos;) k.replace(p, 3, std::to_string(i));
  return k;
}

Expected<Binding> parse_binding(const std::string& file, const std::string& text, const ir::Module& module) {
  Where err{file};
  json j = parse_json(text);
  if (j.is_discarded()) return err("not valid JSON");
  if (!j.is_object()) return err("a binding is a JSON object");
  MLK_RETURN_IF_ERROR(only_fields(err, j, {"about", "inputs", "steps", "unused"}, "the binding"));
  Binding b;
  b.file = file;
  if (!j.contains("inputs")) return err("the binding has no \"inputs\"");
  auto inputs = parse_inputs(err, j["inputs"]);
  if (!inputs.ok()) return inputs.status();
  b.inputs = std::move(*inputs);
  if (!j.contains("steps") || !j["steps"].is_array() || j["steps"].empty())
    return err("\"steps\" must be a non-empty list of steps");
  std::set<std::string> defined;
  for (const auto& in : b.inputs) defined.insert(in.name);
  for (size_t i = 0; i < j["steps"].size(); ++i) {
    auto s = parse_step(err, i, j["steps"][i], module, defined);
    if (!s.ok()) return s.status();
    defined.insert(s->out);
    b.steps.push_back(std::move(*s));
  }
  if (j.contains("unused")) {
    if (!j["unused"].is_array()) return err("\"unused\" must be a list of keys");
    for (const auto& k : j["unused"]) {
      if (!k.is_string()) return err("\"unused\" must be a list of keys");
      b.unused.push_back(k.get<std::string>());
    }
  }
  return b;
}

}  // namespace mlk::rt
