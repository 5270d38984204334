// Whole-model finite-difference gradient check: the analytic gradient of the objective (loss + aux)
// against central differences on sampled coordinates of every parameter tensor. Used by the native
// tests and by `moe-engine-dev selftest`.
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"

namespace moe {

struct TensorGradcheck {
  std::string name;
  double worst_rel_err = 0;  // over the sampled coordinates, |num - ana| / max(|num|, |ana|, floor)
  int samples = 0;
};

// Random tokens (B sequences of T), a perturbation h, and `samples` coordinates per tensor. Coordinates
// whose ±h perturbation changes a routing decision are skipped (the objective is not differentiable there).
// skip_kinks: also skip coordinates whose central differences at h and h/2 (or the one-sided ones) disagree: a
// clamp's kink within ±h (the clamped SwiGLU's limit). A wrong analytic gradient still fails against both.
// finetune: which tensors train (only they are checked); its LoRA adapters' B start random rather than zero, so
// every adapter's A has a gradient too.
std::vector<TensorGradcheck> model_gradcheck(const ModelConfig& cfg, Backend& be, int B, int T, int samples,
                                             float h, uint64_t seed, bool skip_kinks = false,
                                             const FinetuneConfig& finetune = {});

}  // namespace moe
