// The machine's peak arithmetic rate per ISA, measured rather than looked up: every pool thread runs twelve
// independent chains of the ISA's widest multiply-add on registers only (enough to hide the latency on two ports),
// so memory plays no part. A GEMM's fraction of this peak says how much of the cores' arithmetic it uses.
#pragma once

#include "core/threadpool.h"

namespace bench {

struct Peak {
  const char* fp32_isa = "none";  // "avx512" (vfmadd231ps zmm), "avx2" (ymm) or "none"
  double fp32_gflops = 0;
  // "amx" (TDPBF16PS tiles, where the kernels use them), "avx512bf16" (vdpbf16ps zmm), "avx512fma" / "avx2fma" (the
  // fp32 FMA peak, which bounds the FMA bf16 kernels) or "none"
  const char* bf16_isa = "none";
  double bf16_gflops = 0;
};

Peak measure_peak(moe::ThreadPool& tp);
// The AVX2 FMA peak (ymm), which bounds the avx2 and avx2_fma families; 0 without AVX2 and FMA.
double avx2_fma_peak(moe::ThreadPool& tp);

}  // namespace bench
