// The profile files of targets/profiles/, embedded at build time: (file name, text).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mlk {

const std::vector<std::pair<std::string, std::string>>& embedded_profiles();

}  // namespace mlk
