// Whether this process may run Intel AMX-BF16 tile instructions: the CPU reports AMX-TILE and AMX-BF16 (and
// AVX512_BF16, which the AMX family's packers use), the OS saves tile state (XCR0), and Linux granted the
// process the tile data permission (arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)), requested once on first use.
#pragma once
#include <string>

namespace moe::cpu {

struct AmxSupport {
  bool cpu_has_amx;    // CPUID leaf 7: AMX-TILE and AMX-BF16
  bool usable;         // cpu_has_amx and everything else above
  std::string reason;  // why not usable ("" when usable)
};

const AmxSupport& amx_support();

}  // namespace moe::cpu
