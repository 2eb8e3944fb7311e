// A measurement setup and a measurement as bytes, for measuring candidates
// on another machine (`mlk tune --workers`, `mlk worker`; docs/deploy.md,
// "Measurement workers"): the tuner stores the setup once as a blob, each job
// names it by sha256 and carries one schedule; the worker decodes the setup,
// compiles the program's source itself and runs measure() (measure.h) on the
// same inputs and references the tuner computed, so a remote candidate is
// verified exactly as a local one.
//
// The setup's bytes: the line "mlk-measure-setup 1\n", the header's length
// (decimal) and "\n", the header (JSON: source, fn, target, dims, limits, and
// per tensor its dtype, shape and byte range), then the tensors' bytes.
// Decoding checks everything (magic, lengths, dtypes, shapes against byte
// sizes) and says what is wrong; it never trusts a length.
#pragma once

#include <string>
#include <string_view>

#include "autotune/measure.h"
#include "base/status.h"

namespace mlk::tune {

// `source` is the program text the setup's module was compiled from,
// `source_name` the name diagnostics use (its file name) and `precision` the
// policy applied to it (lang/precision.h: "f32", "bf16" or "f16").
Expected<std::string> encode_setup(const MeasureSetup& setup, const std::string& source, const std::string& source_name,
                                   const std::string& precision = "f32");

struct DecodedSetup {
  MeasureSetup setup;  // setup.module is null: compile `source`, apply `precision`, and set it
  std::string source, source_name;
  std::string precision = "f32";  // a setup without the field: f32
};
Expected<DecodedSetup> decode_setup(std::string_view bytes);

// A measurement as JSON (verdict, detail, times, errors) and back.
std::string measurement_json(const Measurement& m);
Expected<Measurement> parse_measurement(const std::string& json_text);

}  // namespace mlk::tune
