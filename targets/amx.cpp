#include "targets/amx.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mlk {

namespace {

constexpr int kArchReqXcompPerm = 0x1023;  // <asm/prctl.h>
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

}  // namespace mlk
