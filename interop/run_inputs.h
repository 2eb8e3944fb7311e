// The inputs of `mlk run`: the parameters of the fn from one or more files
// (--inputs, repeatable), each a safetensors file (one tensor per parameter,
// by name) or an Arrow IPC stream (`.arrows`: one column per parameter, by
// name). Every parameter comes from exactly one file, and every tensor or
// column of every file binds a parameter.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/ir.h"
#include "lang/tensor.h"

namespace mlk::inputs {

// Whether `path` is read as an Arrow IPC stream (it ends in ".arrows").
bool is_arrow_stream(const std::string& path);

// The tensors of `files` in the order of `f`'s parameters. A column of a
// stream binds a parameter of the same name of type Tensor[T, [N]] (an
// Arrow column of T) or Tensor[T, [N, D]] (a FixedSizeList[T, D] column;
// its size must equal D where `dims` or a constant fixes D), T one of I32,
// I64, F16, BF16, F32, F64, Bool; its rows must hold no null, and the stream
// is read as strictly as interop/arrow_reader.h says. A fn with Dataframe
// parameters takes streams for them instead: a stream binds the fn's one
// Dataframe parameter (or the one named NAME by `--inputs NAME=FILE.arrows`),
// read against the schema its type declares (interop/arrow_schema.h), and
// gives the tensors of its non-nullable columns. Messages name the file and
// the parameter or column. With `notes`, one line per stream read says what
// was done with its data (its rows and batches; its columns copied into the
// input tensors: `mlk run` never computes on a stream's memory in place).
// A dimension of `f` that no parameter's shape shows but a Dataframe's
// stream binds (a Category column's dictionary size K) is added to `dims`
// where it has none.
Expected<std::vector<HostTensor>> read_run_inputs(const std::vector<std::string>& files, const ir::Function& f,
                                                  std::map<std::string, int64_t>& dims,
                                                  std::vector<std::string>* notes = nullptr);

}  // namespace mlk::inputs
