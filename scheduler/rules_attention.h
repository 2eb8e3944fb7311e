// The fused attention rule (CPU): scores, mask, softmax and the product
// with V computed per block of query rows, so that the [.., S, S] score,
// exponential and probability tensors exist only as a block of rows in
// cache and are never written to memory whole.
//
// The pattern, read off the stage table (attention_chain): a matmul `pv`
// (the product with V, one reduction over the keys) whose first operand is
// made, through operand and softmax stages only, from exactly one other
// matmul (the scores), every stage of that chain read only by the chain or
// by `pv`, with the shapes of attention: the chain's full stages are
// [batch.., Sq, Sk] and its row stages (softmax max and sum) [batch.., Sq],
// where `pv` is [batch.., Sq, E] reducing over Sk.
//
// With the knob `flash` on `pv` (directive attention_tiles, see
// docs/schedules.md): `pv`'s result is materialised in full register tiles
// (its tm rows, tn vectors; `pv` computed per tile), its row tiles grouped
// into blocks of query rows (the block's three [rows, keys] buffers within
// about 384 KiB), blocks fused with a batch axis and parallel; per block,
// the chain is computed there: the scores in register tiles of their own
// (tm rows by as many vectors of keys as fit next to the accumulators;
// column tiles outermost, the keys packed per column tile), the row max,
// the exponentials, the row sums and the probabilities. The keys' and V's
// operands, when views, are materialised contiguous at root. The softmax is the
// two-pass one within the block (a block's whole key row fits in cache),
// not an online rescaling: the result equals the unfused schedule's up to
// the order of the sums.
#pragma once

#include <string>
#include <vector>

#include "scheduler/schedule.h"

namespace mlk {

struct RuleContext;
struct Schedule;
class KnobValues;

namespace rules {

// The chain's stage names, the scores matmul first, when `pv` ends an
// attention chain; empty otherwise (also when readers are unknown, as in
// hand-made tables).
std::vector<std::string> attention_chain(const std::vector<StageInfo>& stages, const StageInfo& pv);

// Whether the knob `flash` is searched on `s`: it ends an attention chain.
bool ends_attention(const StageInfo& s, const std::vector<StageInfo>& stages);

// `pv`'s schedule with `flash` on (the rule of matmuls calls it).
void schedule_attention_owner(const RuleContext& c, const StageInfo& pv, const KnobValues& k, Schedule& out);

// When `s` is in the chain of a matmul whose `flash` is on, or is the keys'
// operand of its scores: appends its directives (for a chain stage, what
// runs inside a block; the owner places it) and returns true; else false
// and appends nothing. Every rule of a chain stage's kind asks first.
bool schedule_attention_member(const RuleContext& c, const StageInfo& s, Schedule& out);

}  // namespace rules

}  // namespace mlk
