// Halide's run-time error messages as mlk shows them, the same whether a
// kernel ran under the JIT (scheduler/kernel.h) or as an artifact
// (artifact/loaded.h).
#pragma once

#include <string>

namespace mlk {

// Halide reports a failed require() as "Error: Requirement Failed: (COND)
// VALUE ARGS..." with spaces between arguments; mlk shows only ARGS, tidied
// ("gather index 5 is outside [0, 2)"). Any message loses its trailing
// newlines and spaces.
std::string clean_runtime_error(std::string msg);

// Whether `msg` is Halide's report of a failed require().
bool is_requirement_failure(const std::string& msg);

}  // namespace mlk
