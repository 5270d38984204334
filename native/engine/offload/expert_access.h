// The seam between the MoE layer and wherever expert state lives. The layer announces the experts it will
// compute (in compute order), asks for each expert's weights and gradient buffer right before computing it,
// and reports when it is done with it; an implementation decides where those pointers point and when data
// moves. Layers are model layer indices (ExpertRange::layer).
#pragma once
#include <limits>
#include <vector>

#include "model/params.h"

namespace moe {

enum class ExpertPass { Forward, Backward };

class ExpertAccess {
 public:
  virtual ~ExpertAccess() = default;

  // Experts with rows to compute in this pass of `layer`, in the order they will be computed.
  virtual void plan(int layer, ExpertPass pass, const std::vector<int>& experts) = 0;
  // Blocks until the expert's weights are usable for compute.
  virtual FfnParams weights(int layer, int e) = 0;
  // Where backward accumulates the expert's gradient (valid after weights() in the backward pass).
  virtual FfnParams grads(int layer, int e) = 0;
  virtual void done_forward(int layer, int e) = 0;
  // The expert's gradient contribution of this backward pass is complete.
  virtual void done_backward(int layer, int e) = 0;
  // How many experts may be held at once, between weights() and done_*(): the MoE layer computes that many
  // experts' segments as one run (Backend::grouped_matmul_*). 1, the default, keeps one expert in flight, so an
  // offload's slots stay free for the uploads ahead.
  virtual int max_held() const { return 1; }
};

// Every expert in the model's arenas: today's behaviour, no copies.
class ResidentExpertAccess final : public ExpertAccess {
 public:
  ResidentExpertAccess(const ModelParams& params, const ModelParams& grads) : p_(params), g_(grads) {}

  void plan(int, ExpertPass, const std::vector<int>&) override {}
  FfnParams weights(int layer, int e) override { return p_.layers[layer].experts[e]; }
  FfnParams grads(int layer, int e) override { return g_.layers[layer].experts[e]; }
  void done_forward(int, int) override {}
  void done_backward(int, int) override {}
  int max_held() const override { return std::numeric_limits<int>::max(); }

 private:
  const ModelParams& p_;
  const ModelParams& g_;
};

}  // namespace moe
