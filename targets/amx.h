// AMX tiles need the kernel's leave: Linux (5.16 and later) gives a process
// the AMX tile state only after it asks with arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA); the first tile instruction before that dies with
// SIGILL. The permission is the process's, for all its threads.
//
// mlk asks when it lowers for `host` (scheduler/lower.cpp, options_for: a
// refusal lowers without tiles) and before it JIT-compiles tiles; a built
// artifact asks for itself at its first call, in its C ABI wrapper
// (artifact/build.cpp), so that any process that loads it may call it.
#pragma once

#include "base/status.h"

namespace mlk {

// Asks once per process; later calls return the first answer. Unsupported,
// naming the reason, where the kernel refuses (no AMX, or a Linux before 5.16).
Status request_amx_tiles();

}  // namespace mlk
