// Helpers the rules share (scheduler/rules_*.cpp): directive constructors,
// extent clipping and the stage-table predicates that say where fusion and
// the output-tiled GEMM are possible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/rules_knobs.h"
#include "scheduler/schedule.h"

namespace mlk {
struct RuleContext;
}

namespace mlk::rules {

using Kind = StageInfo::Kind;

// The pure variable a{i}.
std::string a(int i);
Directive D(std::string op, std::vector<std::string> vars = {}, std::vector<int64_t> factors = {}, int update = -1);
Directive At(std::string op, std::string stage, std::string var);

// A factor no larger than the extent, when the extent is known.
int64_t clip(int64_t factor, int64_t extent);
// A vector width: the largest power of two no larger than `lanes` and, when
// known, the extent. Never another width: Halide 21 aborts in LLVM on some
// predicated (GuardWithIf) loads of other widths (9 lanes of F32, and 5 in
// a MiniLM layer of 5 tokens), and a tail of a few lanes costs less than that.
int64_t vector_clip(int64_t lanes, int64_t extent);
// Extent i of s, 0 when unknown.
int64_t ext(const StageInfo& s, int i);

const StageInfo* output_of(const std::vector<StageInfo>& stages);

bool is_reduction_like(Kind k);

// Can the matmul be computed per register tile of the output (the classic
// Halide GEMM schedule)? Only when it is the output's shape, so that a tile
// of the output is a tile of the product, and only the output reads it.
bool matmul_at_output(const StageInfo& s, const StageInfo* out);

// Can the matmul be materialised in register tiles of its own (result_tiles):
// a product with one reduction that is not computed per output tile.
bool matmul_result_tiles(const StageInfo& s, const StageInfo* out);

// Stage `s`'s knob values as the schedule being made sets them (c.knobs),
// the registry's defaults for the rest (and for all when c.knobs is null).
KnobValues knob_values(const RuleContext& c, const StageInfo& s);

// The output's loop over its rows (what row-fused stages compute at): a{r-2},
// or `pf` where the elementwise rule fuses a rank-3 output's two outer axes.
std::string output_row_loop(const RuleContext& c);

// Row-wise fusion: computing stage `s` per row of the output.
// row_shaped: `s` has a row's shape (a reduction along the output's
// innermost axis, or a softmax's exponentials of the output's rank).
bool row_shaped(const StageInfo& s, const StageInfo* out);
// row_fusable_in: row-shaped, and every reader is the output or row-fusable
// itself (a softmax: the max read by the exponentials, the exponentials by
// the sum and the output); readers unknown, as in hand-made tables: yes.
// Where the knob `fuse` is searched.
bool row_fusable_in(const StageInfo& s, const std::vector<StageInfo>& stages);
// row_fused: row-shaped, the output not tiled by a matmul (c.output_owner
// null), and every reader other than the output has `fuse`
// on in this schedule (c.knobs) and is row-fused itself: the schedule is
// legal only then (a stage computed inside the output's row loop cannot
// feed one computed at root).
bool row_fused(const RuleContext& c, const StageInfo& s);

// The product per register tile of matmul `mm` computed per tile (tn
// columns, tm rows): initialisation and update vectorised and unrolled, the
// k loop outside the tile (in pair form, the pair vectorised inside it).
void register_tile(const StageInfo& mm, int64_t tn, int64_t tm, int lanes, std::vector<Directive>& mm_ds);

// Parallel over the outermost axis of a rank-r stage's definition `update`;
// for rank >= 4 (and rank 3 where `rank3`: the second axis is not tiled) over
// the two outermost fused (`pb`, `pbu` in an update), so that a batch of one
// (B = 1, H heads) still uses every core.
void par_outer(int r, int update, bool rank3, std::vector<Directive>& ds);

// A reduction whose pure axes give the cores no work to share (a result of
// rank 0, or one whose outer axes hold fewer than 16 rows of at least 16
// values, all extents known) over at least 32768 elements of work: the CPU
// reduction rule splits its reduction into parallel chunks (rfactor_par)
// where the rfactor knob says 1.
bool spread_reduction(const StageInfo& s);

}  // namespace mlk::rules
