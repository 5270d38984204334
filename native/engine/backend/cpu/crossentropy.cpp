// Softmax cross-entropy over V classes, one row per token (parallel over rows). The backward
// recomputes each row's log-sum-exp instead of keeping an [N] buffer; the row kernels run with
// AVX-512 or AVX2 where the CPU has it.
#include "backend/cpu/crossentropy.h"

#include "backend/cpu/crossentropy_rows.h"
#include "backend/cpu/kernel_builds.h"

namespace moe::cpu {

namespace {

struct RowKernels {
  float (*lse)(const float*, int);
  void (*grad)(float*, const float*, int, float, int);
};

const RowKernels& row_kernels() {
  static const RowKernels avx512{crossentropy_row_lse_avx512, crossentropy_row_grad_avx512},
      avx2{crossentropy_row_lse_avx2, crossentropy_row_grad_avx2}, base{crossentropy_row_lse, crossentropy_row_grad};
  return *pick_kernel(&avx512, &avx2, &base);
}

}  // namespace

void crossentropy_forward(ThreadPool& tp, float* losses, const float* logits, const int32_t* targets, int N, int V) {
  const RowKernels& k = row_kernels();
  tp.parallel_for(N, [=, &k](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      if (targets[n] < 0) {
        losses[n] = 0.0f;
        continue;
      }
      const float* x = logits + n * V;
      losses[n] = k.lse(x, V) - x[targets[n]];
    }
  });
}

void crossentropy_backward(ThreadPool& tp, float* dlogits, const float* logits, const int32_t* targets, float scale,
                           int N, int V) {
  const RowKernels& k = row_kernels();
  tp.parallel_for(N, [=, &k](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n)
      if (targets[n] >= 0) k.grad(dlogits + n * V, logits + n * V, targets[n], scale, V);
  });
}

}  // namespace moe::cpu
