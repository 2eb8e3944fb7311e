// Reading and writing mlk HostTensors as safetensors files: the dtype mapping
// between the two and the copy in and out of the strict reader/writer.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "lang/tensor.h"

namespace mlk {

// Every tensor of the file, by name. A dtype mlk has no counterpart for
// (U16, U32, U64, C64, the F8/F6/F4 family) is an error naming the tensor.
Expected<std::map<std::string, HostTensor>> read_safetensors(const std::string& path);

// Writes `tensors` (by name) atomically.
Status write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors);

}  // namespace mlk
