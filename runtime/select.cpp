#include "runtime/select.h"

#include <algorithm>
#include <set>

#include "lang/bind.h"
#include "runtime/resolve.h"

namespace mlk::rt {

const char* rank_name(Rank r) { return r == Rank::kPrefer ? "prefer" : "fallback"; }

namespace {

// "candidate 1 (fallback, /tmp/a_cpu)"
std::string label(size_t index, const Candidate& c) {
  return "candidate " + std::to_string(index) + " (" + rank_name(c.rank) + ", " + c.name + ")";
}

// Continuation lines of a multi-line reason, indented under their first line.
std::string indented(const std::string& s, const std::string& pad) {
  std::string out;
  for (char ch : s) {
    out += ch;
    if (ch == '\n') out += pad;
  }
  return out;
}

// What callers rely on of a fn: dims, parameter names and types, result types.
std::string signature_text(const ir::Function& f) {
  std::string s = "[";
  for (size_t i = 0; i < f.dim_vars.size(); ++i) s += (i ? ", " : "") + f.dim_vars[i];
  s += "](";
  for (size_t i = 0; i < f.params.size(); ++i) s += (i ? ", " : "") + f.params[i].name + ": " + f.params[i].type.str();
  s += ") -> ";
  const auto results = f.results();
  for (size_t i = 0; i < results.size(); ++i) s += (i ? ", " : "") + results[i].type.str();
  return s;
}

// The fns a candidate has: a directory's one fn, or a program's public fns.
std::vector<const ir::Function*> fns_of(const Candidate& c) {
  std::vector<const ir::Function*> out;
  if (!c.program) return out;
  if (c.program->directory) {
    if (const auto* f = c.program->module.find(c.program->directory->fn)) out.push_back(f);
    return out;
  }
  for (const auto& f : c.program->module.functions)
    if (f.is_public) out.push_back(&f);
  return out;
}

}  // namespace

Expected<Candidate> dir_candidate(std::shared_ptr<Runtime> rt, const std::string& dir) {
  if (!rt) return Status::InvalidArgument("dir_candidate(" + dir + "): no runtime");
  Candidate c;
  c.name = dir;
  c.runtime = rt;
  auto prog = rt->LoadArtifactDir(dir);
  if (prog.ok()) {
    c.program = *prog;
    return c;
  }
  const Status::Code code = prog.status().code();
  if (code != Status::Code::kNotFound && code != Status::Code::kUnsupported) return prog.status();
  c.unavailable = prog.status();
  return c;
}

Candidate program_candidate(std::shared_ptr<Runtime> rt, std::shared_ptr<const Program> program, TargetPolicy policy) {
  Candidate c;
  c.name = program ? (program->directory ? program->directory->dir : program->file) : "";
  c.runtime = std::move(rt);
  c.program = std::move(program);
  c.policy = std::move(policy);
  if (c.policy.profiles.empty()) c.policy.profiles = {"host"};  // as TargetPolicy::Parse("")
  return c;
}

Candidate prefer(Candidate c) {
  c.rank = Rank::kPrefer;
  return c;
}

Candidate fallback(Candidate c) {
  c.rank = Rank::kFallback;
  return c;
}

std::string Choice::explain() const {
  std::string s;
  if (const Considered* c = chosen())
    s = "`" + fn + "`: candidate " + std::to_string(c->index) + " (" + rank_name(c->rank) + ", " + c->name +
        "): " + indented(c->reason, "  ");
  else
    s = "`" + fn + "`: no candidate serves it here";
  for (const auto& c : considered)
    if (!c.chosen)
      s += "\n  not candidate " + std::to_string(c.index) + " (" + rank_name(c.rank) + ", " + c.name +
           "): " + indented(c.reason, "    ");
  return s;
}

Expected<std::shared_ptr<Selector>> Selector::Make(std::vector<Candidate> candidates) {
  if (candidates.empty()) return Status::InvalidArgument("select() needs at least one candidate (prefer(..) or fallback(..))");
  std::shared_ptr<Selector> s(new Selector());
  std::map<std::string, std::pair<std::string, size_t>> sigs;  // fn -> (signature, first candidate with it)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!c.program) {
      if (c.unavailable.ok()) return Status::InvalidArgument(label(i, c) + ": neither a program nor why it has none");
      if (c.unavailable.code() == Status::Code::kCorruption) return c.unavailable;  // never skipped
      continue;
    }
    if (!c.runtime) return Status::InvalidArgument(label(i, c) + ": a program without the runtime that loaded it");
    for (const ir::Function* f : fns_of(c)) {
      const std::string text = signature_text(*f);
      auto [it, fresh] = sigs.emplace(f->name, std::make_pair(text, i));
      if (!fresh && it->second.first != text)
        return Status::InvalidArgument("`" + f->name + "` differs between " + label(it->second.second, candidates[it->second.second]) +
                                       ": " + it->second.first + " and " + label(i, c) + ": " + text +
                                       "; select() chooses among builds of the same fn");
    }
  }
  for (Rank r : {Rank::kPrefer, Rank::kFallback})
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].rank == r) s->order_.push_back(i);
  s->candidates_ = std::move(candidates);
  s->cpu_ = detect_cpu();
  s->cuda_ = detect_cuda();
  return s;
}

std::vector<std::string> Selector::fns() const {
  std::set<std::string> names;
  for (const auto& c : candidates_)
    for (const ir::Function* f : fns_of(c)) names.insert(f->name);
  return {names.begin(), names.end()};
}

const ir::Function* Selector::signature(const std::string& fn) const {
  for (const auto& c : candidates_)
    for (const ir::Function* f : fns_of(c))
      if (f->name == fn) return f;
  return nullptr;
}

std::string Selector::static_reason(const Candidate& c, const std::string& fn) const {
  if (!c.program) return "cannot be loaded here: " + c.unavailable.message();
  if (const auto& d = c.program->directory) {
    if (d->fn != fn) return "holds the artifact of `" + d->fn + "`, not of `" + fn + "`";
    auto p = resolve_profile(d->profile);
    if (!p.ok()) return "built for profile `" + d->profile + "`, which this runtime does not know: " + p.status().message();
    Runnable rn = can_run(*p, cpu_, cuda_);
    if (!rn.ok) return "cannot run here: " + d->profile + ": " + rn.reason;
    return "";
  }
  const ir::Function* f = c.program->module.find(fn);
  if (!f || !f->is_public) return c.program->file + " has no public fn `" + fn + "`";
  std::string why;
  for (const auto& name : c.policy.profiles) {
    auto p = resolve_profile(name);
    if (!p.ok()) return "policy " + c.policy.str() + ": " + p.status().message();
    Runnable rn = can_run(*p, cpu_, cuda_);
    if (rn.ok) return "";
    why += (why.empty() ? "" : "; ") + name + ": " + rn.reason;
  }
  return "no profile of policy " + c.policy.str() + " runs here: " + why;
}

Choice Selector::Choose(const std::string& fn) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = choices_.find(fn); it != choices_.end()) return it->second;
  Choice ch;
  ch.fn = fn;
  for (size_t i : order_) {
    const Candidate& c = candidates_[i];
    Considered k{i, c.rank, c.name, false, static_reason(c, fn)};
    if (k.reason.empty()) {
      k.chosen = true;
      k.reason = c.program->directory
                     ? c.program->directory->profile + ": the artifact in " + c.program->directory->dir
                     : "kernels of policy " + c.policy.str() + " (tuned, else the default schedule, as the policy "
                       "allows), chosen per call shape";
    }
    ch.considered.push_back(std::move(k));
    if (ch.considered.back().chosen) break;
  }
  choices_[fn] = ch;
  return ch;
}

Expected<Selector::Picked> Selector::GetKernel(const std::string& fn, const DimEnv& dims) const {
  const std::string id = fn + "|" + dims_str(dims);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = picked_.find(id); it != picked_.end()) return it->second;
  }
  Picked picked;
  picked.choice.fn = fn;
  for (size_t i : order_) {
    const Candidate& c = candidates_[i];
    Considered k{i, c.rank, c.name, false, static_reason(c, fn)};
    if (k.reason.empty()) {
      // Not under mu_: a candidate's runtime may compile (the JIT) for a while.
      auto kernel = c.runtime->GetKernel(c.program, fn, c.policy, dims);
      if (kernel.ok()) {
        k.chosen = true;
        k.reason = (*kernel)->selection().explain();
        picked.kernel = *kernel;
      } else {
        const Status::Code code = kernel.status().code();
        if (code != Status::Code::kNotFound && code != Status::Code::kUnsupported) return kernel.status();
        k.reason = kernel.status().message();
      }
    }
    picked.choice.considered.push_back(std::move(k));
    if (picked.kernel) break;
  }
  if (!picked.kernel) {
    std::string why;
    for (const auto& k : picked.choice.considered)
      why += "\n  candidate " + std::to_string(k.index) + " (" + rank_name(k.rank) + ", " + k.name +
             "): " + indented(k.reason, "    ");
    return Status::NotFound("no candidate of select(...) serves `" + fn + "` at " + dims_str(dims) + " here:" + why);
  }
  std::lock_guard<std::mutex> lock(mu_);
  return picked_.emplace(id, std::move(picked)).first->second;
}

Expected<std::shared_ptr<Selector>> select(std::vector<Candidate> candidates) {
  return Selector::Make(std::move(candidates));
}

}  // namespace mlk::rt
