#include "targets/amx.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mlk {

namespace {

constexpr int kArchGetXcompSupp = 0x1022;  // <asm/prctl.h>
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

}  // namespace

Status request_amx_tiles() {
  static const Status answer = [] {
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return Status::Ok();
    const int e = errno;
    return Status::Unsupported(std::string("this kernel uses AMX tiles, and Linux refused the process their state "
                                           "(arch_prctl ARCH_REQ_XCOMP_PERM: ") +
                               std::strerror(e) +
                               (e == EINVAL ? "; a CPU without AMX, or Linux before 5.16" : "") + ")");
  }();
  return answer;
}

bool amx_tiles_offered() {
  static const bool offered = [] {
    unsigned long features = 0;
    // XTILECFG (17) or XTILEDATA (18): a kernel of this VM lists only the
    // first, and grants the second when asked.
    return syscall(SYS_arch_prctl, kArchGetXcompSupp, &features) == 0 && (features & (3ul << 17)) != 0;
  }();
  return offered;
}

}  // namespace mlk
