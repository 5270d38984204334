// Plain data shared by every backend and by the code that drives one: memory kinds, optimizer
// hyper-parameters, the token dispatch plan and the router's losses. Nothing here knows a backend.
#pragma once
#include <cstdint>
#include <vector>

namespace moe {

enum class MemKind { Device, PinnedHost, PageableHost };

// Fused AdamW's hyper-parameters; the update matches torch.optim.AdamW's order:
//   g = grad_scale·grad ; m = β1·m + (1-β1)·g ; v = β2·v + (1-β2)·g²
//   p = p·(1 - lr·wd) ; p -= (lr / (1-β1^t)) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float grad_scale = 1.0f;  // global-norm clipping folds into this
  int step = 1;             // 1-based, for bias correction
};

// Token dispatch without a dispatch mask: the N·K assignments sorted by expert into contiguous segments.
// Slots inside a segment are ordered by (token, k). With a capacity, the kept assignments are chosen in
// GShard priority order (all k = 0 assignments by token, then k = 1, ...) and then laid out in (token, k)
// order, so capacity >= N·K reproduces the dropless plan exactly (plus padding slots).
struct DispatchPlan {
  int N = 0, E = 0, K = 0;
  int capacity = 0;                  // 0: dropless; else every segment is exactly `capacity` slots (GShard padding)
  int dropped = 0;                   // assignments dropped by capacity
  std::vector<int32_t> counts;       // [E] assignments each expert computes (after dropping)
  std::vector<int32_t> offsets;      // [E+1] segment start of each expert; offsets[E] = S
  std::vector<int32_t> slot_token;   // [S] token of each slot; -1 for a padding slot
  std::vector<int32_t> assign_slot;  // [N·K] slot of assignment (n, k); -1 when dropped
  int total_slots() const { return offsets.empty() ? 0 : offsets[E]; }
};

// LoRA dropout on the adapter's input (PEFT's nn.Dropout before lora_A): x[n, i] is kept, scaled by 1/(1 - p),
// when random_uniform(key, kLoraDropoutStream, n·I + i) > p, else zeroed; the mask depends only on the key and the
// element, so backward rebuilds forward's. p 0: no dropout (and no mask is made).
struct LoraDropoutMask {
  float p = 0.0f;
  uint64_t key = 0;
};

// How a router turns its logits into the K experts of each token and their combine weights (one per MoE
// layer; the model derives it from its features). Every backend's router kernel takes the whole spec.
// Softmax: softmax over all E logits. Sigmoid: sigmoid of each logit on its own (DeepSeek-V3).
enum class RouterScoring { Softmax, Sigmoid };
// Plain: the K largest choice scores (score + selection bias) over all experts. The grouped ones split the E
// experts into n_group equal groups, keep the topk_group groups of largest group score and take the K largest
// choice scores with the other groups' scores set to 0 (as transformers' masked_fill(…, 0.0) does; a
// negative choice score can lose to a masked 0). GroupLimited: group score = the largest choice score in the
// group (DeepSeek-V2 group_limited_greedy). NoAuxTc: group score = the sum of the group's two largest choice
// scores (DeepSeek-V3 noaux_tc).
enum class TopkSelection { Plain, GroupLimited, NoAuxTc };
struct RouterSpec {
  RouterScoring scoring = RouterScoring::Softmax;
  TopkSelection selection = TopkSelection::Plain;
  int n_group = 1, topk_group = 1;  // the grouped selections
  bool renormalize = true;  // the K weights are divided by their sum
  float scale = 1.0f;       // then multiplied by this (DeepSeek's routed_scaling_factor)
  // [E] or null: added to the scores only to choose the experts, never to the weights (aux-loss-free load
  // balancing; DeepSeek-V3's e_score_correction_bias).
  const float* selection_bias = nullptr;
};

// Rotary position embedding over rows of `row` floats: the first `heads` heads of `dim` floats each are rotated,
// the rest of the row is copied. Pair i of a head (i < dim/2) turns by angle t·inv_freq[i] at position t; its two
// members are (i, i + dim/2) in the half-split layout (transformers' rotate_half) or (2i, 2i + 1) interleaved
// (DeepSeek's complex-number form). cos and sin are multiplied by `scale` (YaRN's attention factor).
enum class RopeLayout { HalfSplit, Interleaved };
struct RopeSpec {
  int dim = 0, heads = 0, row = 0;
  float theta = 10000.0f;            // inv_freq[i] = θ^(-2i/dim), in double, when inv_freq is null
  const double* inv_freq = nullptr;  // [dim/2] precomputed (YaRN), or null
  double scale = 1.0;
  RopeLayout layout = RopeLayout::HalfSplit;
  // The fused qkv row [(NH + 2·NKV)·HS]: q and k heads rotated, v copied.
  static RopeSpec qkv(int NH, int NKV, int HS, float theta) {
    return RopeSpec{HS, NH + NKV, (NH + 2 * NKV) * HS, theta};
  }
};

// Options of the attention op beyond plain causal softmax attention (the default is exactly that).
//   window > 0: query t sees only keys t-window+1 .. t (transformers' sliding_window: the last `window` keys,
//     itself included); 0: every earlier key.
//   sinks [NH] (may be null): a learned logit per head that joins each row's softmax denominator and takes
//     probability mass without a value (gpt-oss): p_j = exp(s_j) / (Σ_i exp(s_i) + exp(sink_h)).
//   dsinks [NH]: backward accumulates ∂/∂sinks here (+=); null: the sinks are frozen (no gradient).
struct AttentionSpec {
  int window = 0;
  const float* sinks = nullptr;
  float* dsinks = nullptr;
};

// Linear layers over consecutive row groups of one activation (an MoE layer's expert segments): group g owns rows
// [row0[g], row0[g] + rows[g]) of x and y and has its own weight [O, I], the bf16 copy w_bf16[g] where that is set
// and else the fp32 w[g], and bias b[g] (may be null). Backward accumulates into dw[g] and db[g] (either may be
// null); forward ignores them.
struct LinearGroups {
  std::vector<int64_t> row0;
  std::vector<int> rows;
  std::vector<const float*> w, b;
  std::vector<const uint16_t*> w_bf16;
  std::vector<float*> dw, db;
  int size() const { return static_cast<int>(rows.size()); }
  void add(int64_t first_row, int n, const float* weight, const uint16_t* weight_bf16, const float* bias,
           float* dweight = nullptr, float* dbias = nullptr) {
    row0.push_back(first_row), rows.push_back(n), w.push_back(weight), w_bf16.push_back(weight_bf16);
    b.push_back(bias), dw.push_back(dweight), db.push_back(dbias);
  }
  // f(i, dx_i, dy_i, x_i) for each group with rows, in group order: its rows of dx [.., I] (null stays null),
  // dy [.., O] and x [.., I].
  template <class Fn>
  void for_each_backward(float* dx, const float* dy, const float* x, int I, int O, Fn&& f) const {
    for (int i = 0; i < size(); ++i)
      if (rows[i] > 0) f(i, dx ? dx + row0[i] * I : nullptr, dy + row0[i] * O, x + row0[i] * I);
  }
};

struct RouterLosses {
  // E · Σ_e f_e · P_e, f_e = share of the N·K assignments routed to e, P_e = mean score of e (its softmax
  // probability, or its sigmoid with sigmoid scoring)
  float aux;
  float z;    // mean over tokens of logsumexp(logits[n])²
};

}  // namespace moe
