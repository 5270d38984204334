// LoRA (cpu/lora.h) as GEMMs over a small [N, r] intermediate, as the CPU composes it; the dropout mask is drawn
// on the device from the same counter-based generator (core/rng.h), so it is the CPU's mask exactly.
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"
#include "core/rng.h"

namespace moe::cuda {
namespace {

constexpr uint64_t kLoraDropoutStream = 0x10a4d409;  // cpu/lora.cpp's stream

__global__ void dropout_factors_kernel(float* f, int64_t n, float p, uint64_t key) {
  const float keep = 1.0f / (1.0f - p);
  MOE_CUDA_FOR(j, n) f[j] = random_uniform(key, kLoraDropoutStream, static_cast<uint64_t>(j)) > p ? keep : 0.0f;
}

}  // namespace

void lora_dropout_factors(cudaStream_t s, float* f, int N, int I, const LoraDropoutMask& drop) {
  const int64_t n = (int64_t)N * I;
  if (n > 0) dropout_factors_kernel<<<blocks_for(n), kThreads, 0, s>>>(f, n, drop.p, drop.key);
}

void lora_forward(cudaStream_t s, float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r,
                  float scale, int ldy, const LoraDropoutMask& drop) {
  if (N == 0) return;
  const size_t NI = (size_t)N * I;
  DeviceScratch<float> xd(s, drop.p > 0 ? NI : 0), u(s, (size_t)N * r);
  if (drop.p > 0) {
    lora_dropout_factors(s, xd.get(), N, I, drop);
    multiply(s, xd.get(), x, xd.get(), (int64_t)NI);
    x = xd.get();
  }
  sgemm(s, false, true, N, r, I, 1.0f, x, I, A, I, 0.0f, u.get(), r);
  sgemm(s, false, true, N, O, r, scale, u.get(), r, B, r, 1.0f, y, ldy);
}

void lora_backward(cudaStream_t s, float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A,
                   const float* B, int N, int I, int O, int r, float scale, int ldy, const LoraDropoutMask& drop) {
  if (N == 0) return;
  const size_t NI = (size_t)N * I;
  const bool dropout = drop.p > 0;
  DeviceScratch<float> factors(s, dropout ? NI : 0), xd(s, dropout ? NI : 0), u(s, (size_t)N * r),
      du(s, (size_t)N * r);
  if (dropout) {
    lora_dropout_factors(s, factors.get(), N, I, drop);
    multiply(s, xd.get(), x, factors.get(), (int64_t)NI);
    x = xd.get();
  }
  if (dB) {
    sgemm(s, false, true, N, r, I, 1.0f, x, I, A, I, 0.0f, u.get(), r);
    sgemm(s, true, false, O, r, N, scale, dy, ldy, u.get(), r, 1.0f, dB, r);
  }
  if (!dA && !dx) return;
  sgemm(s, false, false, N, r, O, scale, dy, ldy, B, r, 0.0f, du.get(), r);
  if (dA) sgemm(s, true, false, r, I, N, 1.0f, du.get(), r, x, I, 1.0f, dA, I);
  if (!dx) return;
  if (!dropout) {
    sgemm(s, false, false, N, I, r, 1.0f, du.get(), r, A, I, 1.0f, dx, I);
    return;
  }
  // The input gradient goes back through the mask: d(d(x))/dx = m / (1 - p). xd is free again for d(d(x)).
  sgemm(s, false, false, N, I, r, 1.0f, du.get(), r, A, I, 0.0f, xd.get(), I);
  multiply_accumulate(s, dx, xd.get(), factors.get(), (int64_t)NI);
}

}  // namespace moe::cuda
