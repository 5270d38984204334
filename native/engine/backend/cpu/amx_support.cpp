#include "backend/cpu/amx_support.h"

#include <cerrno>
#include <cstring>

#include "backend/cpu/gemm_driver.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace moe::cpu {
namespace {

#if defined(__x86_64__)
constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;  // CPUID.(7,0):EDX
constexpr unsigned kOsxsave = 1u << 27;                        // CPUID.1:ECX
constexpr unsigned long long kXtileState = 3ull << 17;         // XCR0: XTILECFG, XTILEDATA

bool cpu_has_amx() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d & kAmxBf16) && (d & kAmxTile);
}

bool os_saves_tiles() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & kOsxsave)) return false;
  unsigned lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));  // XCR0 (no -mxsave needed for the inline form)
  return ((static_cast<unsigned long long>(hi) << 32 | lo) & kXtileState) == kXtileState;
}
#endif

AmxSupport detect() {
#if defined(__x86_64__)
  if (!cpu_has_amx()) return {false, false, "this CPU has no AMX (amx_bf16/amx_tile absent)"};
  if (!gemm_driver::cpu_features().avx512_bf16)
    return {true, false, "AMX without AVX512_BF16, which the AMX kernels' packers need"};
  if (!os_saves_tiles()) return {true, false, "the OS does not enable AMX tile state (XCR0)"};
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return {true, false, std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: ") + std::strerror(errno)};
  return {true, true, ""};
#else
  return {true, false, "AMX is only enabled on Linux (arch_prctl permission request)"};
#endif
#else
  return {false, false, "not an x86-64 CPU"};
#endif
}

}  // namespace

const AmxSupport& amx_support() {
  static const AmxSupport s = detect();
  return s;
}

}  // namespace moe::cpu
