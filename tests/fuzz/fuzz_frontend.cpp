// libFuzzer target: arbitrary bytes through lex, parse and check. The front
// end must never crash, hang or read out of bounds, whatever the input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "lang/frontend.h"
#include "lang/ir_printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto r = mlk::compile_source("fuzz.tl", text);
  (void)r.rendered();
  if (r.ok()) (void)mlk::ir::print_module(r.module);
  return 0;
}
