// Test seams: defects that verification tests inject into lowering and
// scheduling, named in $MLK_TEST_FAULT (a comma-separated list). Never set in
// production; each seam is one `if` at the place it breaks:
//   transpose_axes   lowering reads a transpose through the inverse permutation
//   f16_accumulate   an F16 sum accumulates in F16 (each partial sum rounded)
//   unguarded_tail   `split` rounds its loop up (TailStrategy::RoundUp) instead
//                    of guarding the tail, so a ragged extent runs past the end
//   gather_next_row  `gather` reads the row after the one its index names
//                    (the last row stays the last)
#pragma once

namespace mlk {

// Whether `name` is listed in $MLK_TEST_FAULT (read on every call).
bool test_fault(const char* name);

}  // namespace mlk
