// The attention's q/k norms and q/k/v clipping at the model level: whole-model finite-difference gradients for
// an OLMoE-shaped model (RMSNorm over the whole q and k projections, clip_qkv) and a Qwen3-MoE-shaped one
// (per-head q/k RMSNorm, an explicit head size, dense layers), the config's refusals, and both training on the
// bundled corpus (the loss falls).
#include <cstdlib>

#include "backend/registry.h"
#include "core/error.h"
#include "model/config.h"
#include "model/gradcheck.h"
#include "model/params.h"
#include "moe_engine.h"
#include "test_files.h"
#include "testing.h"
#include "train/token_data.h"

using namespace moe;

namespace {

ModelConfig tiny_olmoe() {
  ModelConfig m;
  m.family = "mixtral";
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 4;
  m.qkv_bias = false;
  m.tie_embeddings = false;
  m.max_seq_len = 8;
  m.d_ff = m.expert_d_ff = 24;
  m.n_experts = {4, 4};
  m.top_k = 2;
  m.renormalize = false;
  m.z_loss_coef = 0.01;
  m.init_std = 0.2;
  m.qk_norm = QkNorm::Projection;
  return m;
}

ModelConfig tiny_qwen3() {
  ModelConfig m = tiny_olmoe();
  m.n_layers = 3;
  m.n_kv_heads = 2;
  m.head_dim = 6;  // NH·HS = 24 ≠ C = 16
  m.dense_layers = {1};
  m.renormalize = true;
  m.qk_norm = QkNorm::Head;
  return m;
}

// The config is refused with an error naming `field`.
void expect_refused(const std::string& model_json, const std::string& field) {
  try {
    parse_model_config(json::parse(model_json, "t"));
    CHECK_MSG(false, "accepted: " + model_json);
  } catch (const EngineError& e) {
    CHECK_MSG(std::string(e.what()).find(field) != std::string::npos, std::string("error without ") + field + ": " + e.what());
  }
}

constexpr double kGradTol = 3e-2;  // float32 central differences of a whole model (as test_model.cpp)

void expect_gradients_match(const ModelConfig& cfg, const char* label) {
  auto be = make_backend("cpu", {2});
  auto report = model_gradcheck(cfg, *be, 2, 8, 5, 1e-2f, 11);
  int checked = 0;
  bool saw_q_norm = false;
  for (const auto& t : report) {
    checked += t.samples;
    saw_q_norm |= t.name.find("attn.q_norm.weight") != std::string::npos && t.samples > 0;
    CHECK_MSG(t.worst_rel_err <= kGradTol, std::string(label) + ": " + t.name + " gradient error " +
                                               std::to_string(t.worst_rel_err));
  }
  CHECK_MSG(saw_q_norm, std::string(label) + ": the q norm's weight was not checked");
  CHECK_MSG(checked > 50, std::string(label) + ": too few coordinates checked (routing unstable?)");
}

}  // namespace

TEST(gradients_qk_norm_over_the_projection) { expect_gradients_match(tiny_olmoe(), "q/k norm projection"); }

TEST(gradients_qk_norm_over_the_projection_with_clip_qkv) {
  // Normalised q/k have RMS 1 per row, so a limit of 1.5 clamps a share of q and k (and v stays mostly inside).
  ModelConfig c = tiny_olmoe();
  c.clip_qkv = 1.5;
  expect_gradients_match(c, "q/k norm projection, clip_qkv");
}

TEST(gradients_qk_norm_per_head_head_dim_dense_layer) { expect_gradients_match(tiny_qwen3(), "q/k norm per head"); }

TEST(qk_norm_tensors_have_their_widths) {
  ModelConfig o = tiny_olmoe(), q = tiny_qwen3();
  o.n_kv_heads = 2;
  ParamLayout lo(o), lq(q);
  CHECK(lo.find("layers.0.attn.q_norm.weight")->shape == std::vector<int64_t>{16});
  CHECK(lo.find("layers.0.attn.k_norm.weight")->shape == std::vector<int64_t>{8});
  CHECK(lq.find("layers.2.attn.q_norm.weight")->shape == std::vector<int64_t>{6});
  CHECK(lq.find("layers.2.attn.k_norm.weight")->shape == std::vector<int64_t>{6});
  ModelConfig none = tiny_olmoe();
  none.qk_norm = QkNorm::None;
  CHECK(ParamLayout(none).find("layers.0.attn.q_norm.weight") == nullptr);
}

TEST(config_reads_and_writes_qk_norm_and_clip_qkv) {
  const std::string base = R"({"arch": "mixtral", "d_model": 16, "n_heads": 4, "n_experts": [2, 2, 2, 2], )";
  ModelConfig m = parse_model_config(json::parse(base + R"("qk_norm": "projection", "clip_qkv": 8})", "t"));
  CHECK(m.qk_norm == QkNorm::Projection && m.clip_qkv == 8.0);
  const json::Value back = model_config_to_json(m);
  CHECK(back.find("qk_norm")->string == "projection" && back.find("clip_qkv")->number == 8.0);
  ModelConfig plain = parse_model_config(json::parse(base + R"("clip_qkv": null})", "t"));
  CHECK(plain.qk_norm == QkNorm::None && plain.clip_qkv == 0.0);
  CHECK(model_config_to_json(plain).find("qk_norm") == nullptr);  // configs without them stay as they were
  expect_refused(base + R"("qk_norm": "layer"})", "model.qk_norm");
  expect_refused(base + R"("clip_qkv": 0})", "model.clip_qkv");
  expect_refused(R"({"arch": "gpt-moe", "d_model": 16, "n_heads": 4, "n_experts": [2, 2, 2, 2], "qk_norm": "head"})",
                 "model.qk_norm");
}

namespace {

// Mean loss of the first and last 10 of `steps` steps of a small model on the corpus.
std::pair<double, double> train_losses(const std::string& model_fields, int steps) {
  const std::string cfg = R"({"model": {"arch": "mixtral", "vocab_size": 256, "d_model": 64, "n_heads": 4, "max_seq_len": 64, "d_ff": 128, "n_experts": 4, "top_k": 2, )" + model_fields + R"(},
      "train": {"batch_size": 8, "seq_len": 64, "steps": )" + std::to_string(steps) +
                          R"(, "lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 10, "threads": 2, "seed": 7}})";
  char err[1024] = {};
  moe_engine* e = moe_engine_create(cfg.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  if (!e) return {0, 0};
  CHECK(moe_engine_set_data(e, moe_test::corpus_tokens().c_str()) == MOE_OK);
  std::vector<double> losses;
  moe_step_record r{sizeof(moe_step_record)};
  for (int i = 0; i < steps && moe_engine_step(e, &r) == MOE_OK; ++i) losses.push_back(r.loss);
  moe_engine_destroy(e);
  CHECK(losses.size() == (size_t)steps);
  double first = 0, last = 0;
  for (int i = 0; i < 10 && (size_t)i < losses.size(); ++i) first += losses[i] / 10;
  for (size_t i = losses.size() >= 10 ? losses.size() - 10 : 0; i < losses.size(); ++i) last += losses[i] / 10;
  return {first, last};
}

}  // namespace

TEST(olmoe_shaped_model_trains) {
  const auto [first, last] =
      train_losses(R"("n_layers": 2, "n_kv_heads": 4, "renormalize": false, "qk_norm": "projection", "clip_qkv": 2.0)", 80);
  std::printf("  OLMoE-shaped: loss %.3f -> %.3f\n", first, last);
  CHECK(last < first - 1.0);
}

TEST(qwen3_shaped_model_trains) {
  const auto [first, last] = train_losses(
      R"("n_kv_heads": 2, "head_dim": 32, "qk_norm": "head", "n_layers": 3, "dense_layers": [0])", 80);
  std::printf("  Qwen3-shaped: loss %.3f -> %.3f\n", first, last);
  CHECK(last < first - 1.0);
}

TEST_MAIN()
