// AMX tiles need the kernel's leave: Linux (5.16 and later) gives a process
// the AMX tile state only after it asks with arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA); the first tile instruction before that dies with
// SIGILL. The permission is the process's, for all its threads.
//
// mlk lowers for tiles on `host` only where Linux offers them
// (amx_tiles_offered; scheduler/lower.cpp, options_for) and asks before it
// JIT-compiles tiles; a built
// artifact asks for itself at its first call, in its C ABI wrapper
// (artifact/build.cpp), so that any process that loads it may call it.
#pragma once

#include "base/status.h"

namespace mlk {

// Asks once per process; later calls return the first answer. Unsupported,
// naming the reason, where the kernel refuses (no AMX, or a Linux before 5.16).
Status request_amx_tiles();

// Whether Linux offers the tile state (ARCH_GET_XCOMP_SUPP), without asking
// for it: granted, the state costs the whole process (a F32 kernel timed A/B
// against itself measured +16-23% in some runs once the process held it),
// so mlk asks only where it runs tiles.
bool amx_tiles_offered();

}  // namespace mlk
