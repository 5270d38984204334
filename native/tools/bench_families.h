// Every GEMM kernel family this CPU runs, side by side, whichever the dispatcher picks: what each gives here, so
// a family other machines dispatch to (AVX2 on a CPU with AVX-512, say) can be measured on this one.
//   bench --bf16 --packers    the sgemm_bf16 operand packers, nanoseconds per element
//   bench --bf16 --families   fp32 and bf16 GEMMs on an OLMoE expert's shapes, GFLOP/s and fraction of the peak
//                             that bounds each family (bench_peak.h)
#pragma once

#include "core/threadpool.h"

namespace bench {

void bf16_packers(bool json);
void gemm_families(moe::ThreadPool& tp, bool json);

}  // namespace bench
