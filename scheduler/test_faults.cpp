#include "scheduler/test_faults.h"

#include <cstdlib>
#include <sstream>
#include <string>

namespace mlk {

bool test_fault(const char* name) {
  const char* v = std::getenv("MLK_TEST_FAULT");
  if (!v || !*v) return false;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item == name) return true;
  return false;
}

}  // namespace mlk
