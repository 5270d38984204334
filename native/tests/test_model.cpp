// Whole-model tests: finite-difference gradients for both families and every MoE option, the
// degenerate equivalences (1 expert top-1 == dense FFN; capacity >= tokens == dropless), and
// bit-identical results whatever the thread count.
#include <cstring>

#include "backend/registry.h"
#include "core/rng.h"
#include "model/gradcheck.h"
#include "model/model.h"
#include "testing.h"

using namespace moe;

namespace {

ModelConfig tiny(const std::string& family) {
  ModelConfig m;
  m.family = family;
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = family == "mixtral" ? 2 : 4;
  m.qkv_bias = family == "gpt-moe";
  m.tie_embeddings = family == "gpt-moe";
  m.max_seq_len = 8;
  m.d_ff = m.expert_d_ff = 24;
  m.n_experts = {4, 4};
  m.top_k = 2;
  m.z_loss_coef = 0.01;
  m.init_std = 0.2;
  return m;
}

// Float32 central differences (h = 1e-2) of a whole model carry ~1e-3 relative noise.
constexpr double kGradTol = 3e-2;

void expect_gradients_match(const ModelConfig& cfg, const char* label) {
  auto be = make_backend("cpu", {2});
  auto report = model_gradcheck(cfg, *be, 2, 8, 5, 1e-2f, 11);
  int checked = 0;
  for (const auto& t : report) {
    checked += t.samples;
    CHECK_MSG(t.worst_rel_err <= kGradTol, std::string(label) + ": " + t.name + " gradient error " +
                                               std::to_string(t.worst_rel_err));
  }
  CHECK_MSG(checked > 50, std::string(label) + ": too few coordinates checked (routing unstable?)");
}

struct Run {
  std::vector<float> logits, grads;
  double loss = 0, aux = 0;
};

Run run_once(Model& m, int B, int T, uint64_t seed) {
  const int N = B * T, V = m.config().vocab_size;
  std::vector<int32_t> in(N), tg(N);
  for (int i = 0; i < N; ++i) {
    in[i] = static_cast<int32_t>(random_u64(seed, 1, i) % V);
    tg[i] = static_cast<int32_t>(random_u64(seed, 2, i) % V);
  }
  m.zero_grads();
  ForwardResult r = m.forward(in.data(), tg.data(), B, T);
  m.backward(1.0f);
  Run out;
  out.loss = r.loss;
  out.aux = r.aux_loss;
  out.logits.resize((size_t)N * V);
  out.grads.resize(m.num_params());
  m.backend().copy(out.logits.data(), m.logits(), out.logits.size() * sizeof(float));
  m.backend().copy(out.grads.data(), m.grads(), out.grads.size() * sizeof(float));
  return out;
}

std::vector<float> tensor(Model& m, const std::vector<float>& arena, const std::string& name) {
  const ParamTensor* t = m.layout().find(name);
  return std::vector<float>(arena.begin() + t->offset, arena.begin() + t->offset + t->numel);
}

void copy_tensor(Model& dst, const std::string& dst_name, Model& src, const std::string& src_name) {
  const ParamTensor* d = dst.layout().find(dst_name);
  const ParamTensor* s = src.layout().find(src_name);
  dst.backend().copy(dst.params() + d->offset, src.params() + s->offset, s->numel * sizeof(float));
}

}  // namespace

TEST(gradients_gpt_moe_top2_dropless) { expect_gradients_match(tiny("gpt-moe"), "gpt-moe top-2"); }

TEST(gradients_gpt_moe_top1_capacity) {
  ModelConfig c = tiny("gpt-moe");
  c.top_k = 1;
  c.renormalize = false;
  c.capacity_factor = 1.0;
  expect_gradients_match(c, "gpt-moe top-1 capacity");
}

TEST(gradients_gpt_moe_residual_pyramid_dense_layers) {
  ModelConfig c = tiny("gpt-moe");
  c.n_layers = 4;
  c.moe_every = 2;
  c.n_experts = {2, 4};
  c.residual_mlp = true;
  c.top_k = 1;
  expect_gradients_match(c, "gpt-moe PR-MoE");
}

TEST(gradients_mixtral_top2_dropless) { expect_gradients_match(tiny("mixtral"), "mixtral top-2"); }

TEST(gradients_mixtral_shared_expert_gated_capacity) {
  ModelConfig c = tiny("mixtral");
  c.shared_expert_d_ff = 20;
  c.shared_expert_gate = true;
  c.qkv_bias = true;
  c.capacity_factor = 1.0;
  c.renormalize = false;
  expect_gradients_match(c, "mixtral shared+gate capacity");
}

TEST(gradients_mixtral_shared_expert_ungated_top1) {
  ModelConfig c = tiny("mixtral");
  c.shared_expert_d_ff = 20;
  c.top_k = 1;
  expect_gradients_match(c, "mixtral shared top-1");
}

// An explicit head size (NH·HS = 24 ≠ C = 16), a dense layer listed by index, scaled weights and a selection
// bias (zero here; the router's own test moves it).
TEST(gradients_mixtral_head_dim_dense_layers_scaled_routing) {
  ModelConfig c = tiny("mixtral");
  c.n_layers = 3;
  c.dense_layers = {1};
  c.head_dim = 6;
  c.routed_scaling = 2.5;
  c.selection_bias = true;
  c.n_experts = {4, 4};
  CHECK(!c.is_moe_layer(1) && c.is_moe_layer(2) && c.moe_index(2) == 1 && c.n_moe_layers() == 2);
  expect_gradients_match(c, "mixtral head_dim dense_layers scaled");
}

TEST(one_expert_top1_equals_dense_ffn) {
  for (const std::string arch : {"gpt-moe", "mixtral"}) {
    auto be = make_backend("cpu", {2});
    ModelConfig moe_cfg = tiny(arch);
    moe_cfg.n_experts = {1, 1};
    moe_cfg.top_k = 1;
    moe_cfg.aux_loss_coef = 0;
    moe_cfg.z_loss_coef = 0;
    ModelConfig dense_cfg = moe_cfg;  // layer 0 becomes a dense FFN of the same width
    dense_cfg.moe_every = 2;
    dense_cfg.n_experts = {1};
    Model a(moe_cfg, *be), b(dense_cfg, *be);
    a.init(5);
    b.init(5);
    for (const ParamTensor& t : b.layout().tensors()) {
      std::string src = t.name;
      if (src.rfind("layers.0.mlp.", 0) == 0) src = "layers.0.moe.experts.0." + src.substr(13);
      copy_tensor(b, t.name, a, src);
    }
    Run ra = run_once(a, 2, 8, 3), rb = run_once(b, 2, 8, 3);
    CHECK(ra.logits == rb.logits);
    CHECK(ra.loss == rb.loss);
    for (const ParamTensor& t : b.layout().tensors()) {
      std::string src = t.name;
      if (src.rfind("layers.0.mlp.", 0) == 0) src = "layers.0.moe.experts.0." + src.substr(13);
      CHECK_MSG(tensor(b, rb.grads, t.name) == tensor(a, ra.grads, src), "gradient of " + t.name + " differs");
    }
  }
}

TEST(capacity_at_least_tokens_equals_dropless) {
  for (const std::string arch : {"gpt-moe", "mixtral"}) {
    auto be = make_backend("cpu", {2});
    ModelConfig dropless = tiny(arch);
    ModelConfig padded = dropless;
    padded.capacity_factor = 4.0;  // = E, so capacity = N·K: nothing can be dropped
    Model a(dropless, *be), b(padded, *be);
    a.init(9);
    b.init(9);
    Run ra = run_once(a, 2, 8, 4), rb = run_once(b, 2, 8, 4);
    CHECK(ra.logits == rb.logits);
    CHECK(ra.loss == rb.loss);
    CHECK(ra.aux == rb.aux);
    double worst = 0;
    for (size_t i = 0; i < ra.grads.size(); ++i) worst = std::fmax(worst, moe_test::rel_err(ra.grads[i], rb.grads[i], 1e-6));
    CHECK_MSG(worst <= 1e-6, "capacity vs dropless gradient differs by " + std::to_string(worst));
  }
}

TEST(capacity_drops_change_the_result) {
  auto be = make_backend("cpu", {2});
  ModelConfig dropless = tiny("mixtral");
  ModelConfig tight = dropless;
  tight.capacity_factor = 0.5;
  Model a(dropless, *be), b(tight, *be);
  a.init(9);
  b.init(9);
  Run ra = run_once(a, 2, 8, 4), rb = run_once(b, 2, 8, 4);
  CHECK(b.moe_layer(0).plan().dropped > 0);
  CHECK(ra.logits != rb.logits);
}

TEST(results_are_bit_identical_across_thread_counts) {
  for (const std::string arch : {"gpt-moe", "mixtral"}) {
    ModelConfig c = tiny(arch);
    c.d_model = 64;
    c.d_ff = c.expert_d_ff = 96;
    c.max_seq_len = 32;
    std::vector<Run> runs;
    for (int threads : {1, 2, 3}) {
      auto be = make_backend("cpu", {threads});
      Model m(c, *be);
      m.init(21);
      runs.push_back(run_once(m, 3, 32, 8));
    }
    for (size_t i = 1; i < runs.size(); ++i) {
      CHECK(runs[i].logits == runs[0].logits);
      CHECK(runs[i].grads == runs[0].grads);
      CHECK(runs[i].loss == runs[0].loss);
    }
  }
}

TEST_MAIN()
