#include "infer/generator.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/linear.h"

namespace moe {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::None: return "none";
    case StopReason::StopToken: return "stop_token";
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::Length: return "length";
  }
  return "none";
}

Generator::Generator(Model& model, ExpertAccess* experts)
    : model_(model),
      be_(model.backend()),
      cfg_(model.config()),
      f_(model.features()),
      experts_(experts),
      attention_(cfg_, f_) {
  if (!experts_) {
    resident_ = std::make_unique<ResidentExpertAccess>(model.param_ptrs(), model.grad_ptrs());
    experts_ = resident_.get();
  }
  for (int l = 0; l < cfg_.n_layers; ++l) {
    if (!cfg_.is_moe_layer(l)) continue;
    MoeShape shape = MoeShape::from_config(cfg_, l);
    shape.capacity_factor = 0;
    moe_layers_.push_back(std::make_unique<MoeLayer>(shape, l));
  }
  cache_.reset(be_, std::vector<KvLayerShape>(cfg_.n_layers, attention_.cache_shape()), cfg_.max_seq_len);
  last_experts_.assign(moe_layers_.size(), {});
}

void Generator::reset() {
  cache_.clear();
  last_logits_.clear();
  pending_ = -1;
  for (auto& e : last_experts_) e.clear();
}

void Generator::norm(float* out, const float* x, const float* w, const float* b, int n) {
  reserve_floats(be_, mean_, n);
  reserve_floats(be_, rstd_, n);
  switch (f_.norm) {
    case NormKind::LayerNorm:
      be_.layernorm_forward(out, mean_.f(), rstd_.f(), x, w, b, n, cfg_.d_model, (float)cfg_.norm_eps);
      return;
    case NormKind::RmsNorm: be_.rmsnorm_forward(out, rstd_.f(), x, w, n, cfg_.d_model, (float)cfg_.norm_eps); return;
  }
}

void Generator::feed(const int32_t* tokens, int n, std::vector<float>* all_logits) {
  check(n > 0, "generation: nothing to feed");
  const int first = cache_.length(), C = cfg_.d_model, V = cfg_.vocab_size;
  check(first + n <= cfg_.max_seq_len, "generation: " + std::to_string(first + n) +
                                           " positions exceed model.max_seq_len " + std::to_string(cfg_.max_seq_len));
  for (int i = 0; i < n; ++i)
    check(tokens[i] >= 0 && tokens[i] < V, "generation: token " + std::to_string(tokens[i]) +
                                               " is outside the vocabulary [0, " + std::to_string(V) + ")");
  cache_.ensure(first + n);
  model_.prepare_weights();  // bf16 compute: the copies of weights a load or an optimizer step changed
  const ModelParams& p = model_.param_ptrs();
  for (DeviceBuffer* b : {&x_, &ln_, &mid_, &ffn_}) reserve_floats(be_, *b, (size_t)n * C);
  for (int i = 0; i < n; ++i) {
    const float* e = p.wte + (size_t)tokens[i] * C;
    float* o = x_.f() + (size_t)i * C;
    if (p.wpe) {
      const float* pe = p.wpe + (size_t)(first + i) * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + pe[c];
    } else {
      std::copy_n(e, C, o);
    }
  }
  for (int l = 0; l < cfg_.n_layers; ++l) layer(l, first, n);
  cache_.advance(n);

  // Logits of every row, or of the last only.
  const int rows = all_logits ? n : 1;
  const float* from = x_.f() + (size_t)(n - rows) * C;
  norm(ln_.f(), from, p.norm_f_w, p.norm_f_b, rows);
  reserve_floats(be_, logits_, (size_t)rows * V);
  linear_forward(be_, logits_.f(), ln_.f(), p.lm_head, p.lm_head_bf16, nullptr, rows, C, V);
  if (all_logits) all_logits->assign(logits_.f(), logits_.f() + (size_t)n * V);
  last_logits_.assign(logits_.f() + (size_t)(rows - 1) * V, logits_.f() + (size_t)rows * V);
}

// resid = x + attention(norm1(x)); x = resid + ffn(norm2(resid)), in the full forward's order of operations.
void Generator::layer(int l, int first, int n) {
  const int C = cfg_.d_model;
  const LayerParams& p = model_.param_ptrs().layers[l];
  float* x = x_.f();
  norm(ln_.f(), x, p.norm1_w, p.norm1_b, n);
  attention_.forward(be_, p, cache_, l, mid_.f(), ln_.f(), first, n);
  be_.accumulate(mid_.f(), x, (int64_t)n * C);
  norm(ln_.f(), mid_.f(), p.norm2_w, p.norm2_b, n);
  if (cfg_.is_moe_layer(l)) {
    const int m = cfg_.moe_index(l);
    moe_layers_[m]->forward(be_, p, *experts_, ffn_.f(), ln_.f(), n);
    record_experts(m, n);
  } else {
    const FfnShape fs{C, cfg_.d_ff, f_.activation, (float)cfg_.swiglu_alpha, (float)cfg_.swiglu_limit};
    reserve_floats(be_, h_, (size_t)n * fs.in_rows());
    reserve_floats(be_, act_, (size_t)n * fs.F);
    ffn_forward(be_, p.mlp, fs, ffn_.f(), ln_.f(), h_.f(), act_.f(), n);
  }
  be_.add_forward(x, mid_.f(), ffn_.f(), (int64_t)n * C);
}

// The last row's experts, read back from the layer's dispatch plan: assignment (n, k) sits in slot
// assign_slot[n·K + k], inside its expert's segment.
void Generator::record_experts(int m, int n) {
  const DispatchPlan& plan = moe_layers_[m]->plan();
  const int K = plan.K;
  std::vector<int32_t>& out = last_experts_[m];
  out.assign(K, -1);
  for (int k = 0; k < K; ++k) {
    const int slot = plan.assign_slot[(size_t)(n - 1) * K + k];
    if (slot < 0) continue;
    out[k] = static_cast<int32_t>(std::upper_bound(plan.offsets.begin(), plan.offsets.end(), slot) -
                                  plan.offsets.begin() - 1);
  }
}

GeneratedToken Generator::step(const SamplingOptions& sampling, uint64_t draw) {
  if (pending_ >= 0) {
    const int32_t t = pending_;
    pending_ = -1;
    feed(&t, 1);
  }
  check(!last_logits_.empty(), "generation: feed a prompt before stepping");
  GeneratedToken g;
  g.token = sample_token(last_logits_.data(), cfg_.vocab_size, sampling, draw);
  g.experts = last_experts_;
  pending_ = g.token;
  return g;
}

std::vector<GeneratedToken> Generator::generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                                const std::function<bool(const GeneratedToken&)>& on_token) {
  check_sampling(options.sampling);
  check(options.max_tokens >= 1, "generation: max_tokens must be >= 1 (got " + std::to_string(options.max_tokens) + ")");
  check(!prompt.empty(), "generation: the prompt is empty");
  reset();
  feed(prompt.data(), static_cast<int>(prompt.size()));
  std::vector<GeneratedToken> out;
  for (int i = 0; i < options.max_tokens; ++i) {
    // The next token would need a position past the model's last.
    if (i > 0 && position() >= cfg_.max_seq_len) {
      out.back().stop = StopReason::Length;
      break;
    }
    GeneratedToken g = step(options.sampling, static_cast<uint64_t>(i));
    const bool stop = std::find(options.stop_tokens.begin(), options.stop_tokens.end(), g.token) !=
                      options.stop_tokens.end();
    if (stop) g.stop = StopReason::StopToken;
    else if (i + 1 == options.max_tokens) g.stop = StopReason::MaxTokens;
    out.push_back(g);
    if (on_token && !on_token(out.back())) break;
    if (stop) break;
  }
  return out;
}

}  // namespace moe
