// The fused attention rule (see rules_attention.h).
#include "scheduler/rules_attention.h"

#include <algorithm>
#include <set>

#include "scheduler/rules.h"
#include "scheduler/rules_common.h"

namespace mlk::rules {

namespace {

const StageInfo* find(const std::vector<StageInfo>& stages, const std::string& name) {
  for (const StageInfo& s : stages)
    if (s.name == name) return &s;
  return nullptr;
}

// The stages `x` reads (those whose readers name it), inputs left out.
std::vector<const StageInfo*> producers(const std::vector<StageInfo>& stages, const std::string& x) {
  std::vector<const StageInfo*> out;
  for (const StageInfo& s : stages)
    if (s.kind != Kind::kInput && std::binary_search(s.readers.begin(), s.readers.end(), x)) out.push_back(&s);
  return out;
}

// Shapes of attention: a full chain stage is [batch.., Sq, Sk], a row stage
// [batch.., Sq], where pv is [batch.., Sq, E] reducing over Sk.
bool attention_shape(const StageInfo& m, const StageInfo& pv) {
  const int r = pv.rank;
  std::vector<int64_t> rows(pv.extents.begin(), pv.extents.end() - 1);
  if (m.kind == Kind::kSoftmaxMax || m.kind == Kind::kSoftmaxSum) return m.rank == r - 1 && m.extents == rows;
  if (m.rank != r) return false;
  rows.push_back(pv.rextents[0]);
  return m.extents == rows;
}

// pv's register tile: tm rows (a block of queries) by tn vectors.
std::pair<int64_t, int64_t> pv_tile(const RuleContext& c, const StageInfo& pv, const KnobValues& k) {
  const int r = pv.rank;
  return {clip(k[Knob::kTm], ext(pv, r - 2)), clip(c.lanes * k[Knob::kTn], ext(pv, r - 1))};
}

// The scores' register tile within a block of `tm` rows: as many vectors of
// keys as fit the registers next to tm rows of accumulators (at most 4),
// no more than the keys.
int64_t scores_vectors(const RuleContext& c, const StageInfo& scores, int64_t tm) {
  const int regs = c.lanes >= 16 ? 32 : 16;
  const int64_t keys = ext(scores, scores.rank - 1);
  int64_t most = keys > 0 ? std::max<int64_t>(1, (keys + c.lanes - 1) / c.lanes) : 4;
  for (int64_t t = std::min<int64_t>(4, most); t > 1; --t)
    if (tm * t + t + 1 <= regs) return t;
  return 1;
}

}  // namespace

std::vector<std::string> attention_chain(const std::vector<StageInfo>& stages, const StageInfo& pv) {
  if (pv.kind != Kind::kMatmul || pv.rvars != 1 || pv.rank < 3 || pv.operands.size() != 2) return {};
  if (pv.rextents.size() != 1) return {};
  const StageInfo* first = find(stages, pv.operands[0]);
  if (!first || first->kind == Kind::kInput) return {};
  std::vector<const StageInfo*> todo = {first};
  std::set<std::string> seen = {first->name};
  std::vector<std::string> chain;
  const StageInfo* scores = nullptr;
  bool softmax = false;
  while (!todo.empty()) {
    const StageInfo* m = todo.back();
    todo.pop_back();
    if (m->readers.empty() || !attention_shape(*m, pv)) return {};
    if (m->kind == Kind::kMatmul) {
      if (scores || m->rvars != 1) return {};
      scores = m;
      continue;  // its operands are its own
    }
    if (m->kind == Kind::kSoftmaxExp) softmax = true;
    if (m->kind != Kind::kOperand && m->kind != Kind::kSoftmaxExp && m->kind != Kind::kSoftmaxMax &&
        m->kind != Kind::kSoftmaxSum)
      return {};
    chain.push_back(m->name);
    for (const StageInfo* p : producers(stages, m->name))
      if (seen.insert(p->name).second) todo.push_back(p);
  }
  if (!scores || !softmax) return {};
  // Every reader of every member lies in the chain or is pv.
  std::set<std::string> members(chain.begin(), chain.end());
  members.insert(scores->name);
  for (const std::string& n : members)
    for (const std::string& rd : find(stages, n)->readers)
      if (rd != pv.name && !members.count(rd)) return {};
  chain.insert(chain.begin(), scores->name);
  return chain;
}

bool ends_attention(const StageInfo& s, const std::vector<StageInfo>& stages) {
  return !attention_chain(stages, s).empty();
}

void schedule_attention_owner(const RuleContext& c, const StageInfo& pv, const KnobValues& k, Schedule& out) {
  const int r = pv.rank, lanes = c.lanes;
  const auto [tm, tn] = pv_tile(c, pv, k);
  std::vector<std::string> chain = attention_chain(c.stages, pv);
  const StageInfo& scores = *find(c.stages, chain.front());
  const int64_t sn = clip(lanes * scores_vectors(c, scores, tm), ext(scores, r - 1));
  // Row tiles per block: the block's scores, exponentials and probabilities
  // (three buffers of rows x keys) within about 384 KiB, at most 16 tiles.
  const int64_t keys = pv.rextents[0] > 0 ? pv.rextents[0] : 512;
  const int64_t nb = std::clamp<int64_t>(32768 / (keys * tm), 1, 16);
  std::vector<Directive>& ds = out.stages[pv.name];
  ds.push_back(D("attention_tiles", chain, {tn, tm, vector_clip(lanes, tn), sn, tm, nb}));
  register_tile(pv, tn, tm, lanes, ds);
}

bool schedule_attention_member(const RuleContext& c, const StageInfo& s, Schedule& out) {
  if (s.kind != Kind::kMatmul && s.kind != Kind::kOperand && s.kind != Kind::kSoftmaxMax &&
      s.kind != Kind::kSoftmaxExp && s.kind != Kind::kSoftmaxSum)
    return false;
  const StageInfo* pv = nullptr;
  std::vector<std::string> chain;
  for (const StageInfo& m : c.stages) {
    if (m.kind != Kind::kMatmul || &m == &s || !knob_values(c, m)[Knob::kFlash]) continue;
    auto ch = attention_chain(c.stages, m);
    if (ch.empty()) continue;
    const StageInfo& scores = *find(c.stages, ch.front());
    // The keys' operand of the scores, and V when it is a view.
    const bool keys = (scores.operands.size() == 2 && scores.operands[1] == s.name) ||
                      (s.kind == Kind::kOperand && m.operands[1] == s.name);
    if (keys || std::count(ch.begin(), ch.end(), s.name)) {
      pv = &m;
      chain = ch;
    }
  }
  if (!pv) return false;
  std::vector<Directive>& ds = out.stages[s.name];
  const int r = s.rank, lanes = c.lanes;
  if (!std::count(chain.begin(), chain.end(), s.name)) {
    // The keys' operand of the scores (k transposed, a view) and V's:
    // materialised contiguous at root, so that a head's slice is one block
    // of memory (the keys are then packed per column tile of the scores).
    ds.push_back(D("compute_root"));
    ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}));
    par_outer(r, -1, true, ds);
    return true;
  }
  // Placed by the owner's attention_tiles; here what runs inside a block.
  if (s.kind == Kind::kSoftmaxMax || s.kind == Kind::kSoftmaxSum) {
    ds.push_back(D("rfactor_vector", {"r0", "u"}, {lanes}));
    return true;
  }
  if (s.kind != Kind::kMatmul) {
    ds.push_back(D("vectorize", {a(r - 1)}, {vector_clip(lanes, ext(s, r - 1))}));
    return true;
  }
  // The scores per register tile: tm rows (the block) by as many vectors of keys as fit.
  const int64_t tm = pv_tile(c, *pv, knob_values(c, *pv)).first;
  register_tile(s, clip(lanes * scores_vectors(c, s, tm), ext(s, r - 1)), tm, lanes, ds);
  return true;
}

}  // namespace mlk::rules
