// DeepSeek-shaped models: the generalised rope op (frequency table, cos/sin scale, interleaved pairs) on every
// backend, YaRN's frequencies against values computed by hand from transformers' formula, whole-model gradients
// of multi-head latent attention with grouped and sigmoid routing, and a tiny DeepSeek-shaped model's loss
// falling on the bundled corpus.
#include <cmath>
#include <cstdlib>

#include "backend/registry.h"
#include "model/config.h"
#include "model/gradcheck.h"
#include "model/mla_block.h"
#include "model/model.h"
#include "moe_engine.h"
#include "ops_checks.h"
#include "test_files.h"
#include "testing.h"
#include "train/hf_interchange.h"
#include "train/token_data.h"

using namespace moe;
using moe_test::gradcheck;
using moe_test::random_vector;
using ops_test::for_each_backend;

namespace {

// out = rope(x) in double, straight from the definition.
std::vector<double> ref_rope(const std::vector<float>& x, int B, int T, const RopeSpec& s) {
  std::vector<double> y(x.begin(), x.end());
  const int half = s.dim / 2;
  for (int n = 0; n < B * T; ++n) {
    const int t = n % T;
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double f = s.inv_freq ? s.inv_freq[i] : std::pow((double)s.theta, -2.0 * i / s.dim);
        const double c = std::cos(t * f) * s.scale, sn = std::sin(t * f) * s.scale;
        const int a = n * s.row + h * s.dim + (s.layout == RopeLayout::Interleaved ? 2 * i : i);
        const int b = a + (s.layout == RopeLayout::Interleaved ? 1 : half);
        y[a] = x[a] * c - x[b] * sn;
        y[b] = x[b] * c + x[a] * sn;
      }
  }
  return y;
}

}  // namespace

TEST(rope_table_scale_and_interleaved_layout) {
  const std::vector<double> freq = {1.0, 0.3, 0.05, 0.001};
  for_each_backend([&](Backend& be) {
    const int B = 2, T = 11;
    for (RopeLayout layout : {RopeLayout::HalfSplit, RopeLayout::Interleaved}) {
      for (bool table : {false, true}) {
        RopeSpec s{8, 3, 3 * 8 + 5, 500.0f, table ? freq.data() : nullptr, table ? 1.37 : 1.0, layout};
        const int n = B * T * s.row;
        auto x = random_vector(n, 1), r = random_vector(n, 2);
        std::vector<float> out(n), dx(n, 0.0f);
        be.rope_forward(out.data(), x.data(), B, T, s);
        const auto ref = ref_rope(x, B, T, s);
        double worst = 0;
        for (int i = 0; i < n; ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
        CHECK_MSG(worst < 1e-5, "rope forward error " + std::to_string(worst));
        auto loss = [&] {
          be.rope_forward(out.data(), x.data(), B, T, s);
          double sum = 0;
          for (int i = 0; i < n; ++i) sum += (double)out[i] * r[i];
          return sum;
        };
        be.rope_backward(dx.data(), r.data(), B, T, s);
        const double err = gradcheck(x, dx, loss, 64);
        CHECK_MSG(err < 1e-2, "rope gradient error " + std::to_string(err));
      }
    }
  });
}

// DeepSeek-V2-Lite's rope_scaling on its 64-wide rope part; expected values from _compute_yarn_parameters.
TEST(yarn_frequencies_match_transformers_formula) {
  RopeScalingConfig y;
  y.type = RopeScalingType::Yarn;
  y.factor = 40;
  y.original_max_position_embeddings = 4096;
  y.mscale = y.mscale_all_dim = 0.707;
  const RopeFrequencies f = rope_frequencies(y, 64, 10000.0, 163840);
  const std::pair<int, double> expect[] = {{0, 1.0},
                                           {5, 0.23713737056616555},
                                           {10, 0.056234132519034905},
                                           {16, 0.0055},
                                           {20, 0.0007905694150420945},
                                           {31, 3.33380358040831e-06}};
  for (auto [i, v] : expect) CHECK_MSG(std::fabs(f.inv_freq[i] / v - 1) < 1e-12, "inv_freq[" + std::to_string(i) + "]");
  CHECK_NEAR(f.attention_factor, 1.0, 1e-15);  // mscale == mscale_all_dim
  y.mscale = 0;
  CHECK_NEAR(rope_frequencies(y, 64, 10000.0, 163840).attention_factor, 1.3688879454113936, 1e-12);
  CHECK_NEAR(yarn_mscale(40, 0.707) * yarn_mscale(40, 0.707), 1.5896261651208736, 1e-12);
}

namespace {

ModelConfig tiny_deepseek(int q_lora_rank, TopkSelection selection, RouterScoring scoring, bool yarn) {
  ModelConfig m;
  m.family = "mixtral";
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 3;
  m.n_heads = 2;
  m.n_kv_heads = 2;
  m.qkv_bias = false;
  m.tie_embeddings = false;
  m.max_seq_len = 8;
  m.d_ff = 20;
  m.expert_d_ff = 12;
  m.shared_expert_d_ff = 24;
  m.dense_layers = {0};
  m.n_experts = {8, 8};
  m.top_k = 2;
  m.renormalize = scoring == RouterScoring::Sigmoid;
  m.routed_scaling = 2.5;
  m.z_loss_coef = 0.01;
  m.init_std = 0.2;
  m.latent = {q_lora_rank, 10, 6, 4, 8, true, yarn};
  if (yarn) {
    m.rope_scaling.type = RopeScalingType::Yarn;
    m.rope_scaling.factor = 4;
    m.rope_scaling.original_max_position_embeddings = 4;
    m.rope_scaling.mscale = 0.9;
    m.rope_scaling.mscale_all_dim = 0.6;
  }
  m.router = {scoring, selection, 4, 2};
  m.selection_bias = scoring == RouterScoring::Sigmoid;
  return parse_model_config(model_config_to_json(m));
}

void expect_gradients_match(const ModelConfig& cfg, const std::string& label) {
  auto be = make_backend("cpu", {2});
  auto report = model_gradcheck(cfg, *be, 2, 8, 5, 1e-2f, 11);
  int checked = 0;
  for (const auto& t : report) {
    checked += t.samples;
    CHECK_MSG(t.worst_rel_err <= 3e-2, label + ": " + t.name + " gradient error " + std::to_string(t.worst_rel_err));
  }
  CHECK_MSG(checked > 50, label + ": too few coordinates checked");
}

}  // namespace

TEST(latent_attention_gradients_v2_shapes) {
  expect_gradients_match(tiny_deepseek(0, TopkSelection::Plain, RouterScoring::Softmax, true),
                         "q_lora_rank null, greedy, yarn");
  expect_gradients_match(tiny_deepseek(6, TopkSelection::GroupLimited, RouterScoring::Softmax, false),
                         "q_lora_rank 6, group_limited_greedy");
}

TEST(latent_attention_gradients_v3_shapes) {
  expect_gradients_match(tiny_deepseek(6, TopkSelection::NoAuxTc, RouterScoring::Sigmoid, true),
                         "q_lora_rank 6, sigmoid noaux_tc, yarn mscale");
}

// bf16 compute reaches latent attention's projections too (the kv_a rope rows through an offset bf16 pointer).
TEST(latent_attention_bf16_compute_tracks_fp32) {
  const ModelConfig cfg = tiny_deepseek(6, TopkSelection::NoAuxTc, RouterScoring::Sigmoid, true);
  auto be = make_backend("cpu", {2});
  std::vector<int32_t> tokens(16), targets(16);
  for (int i = 0; i < 16; ++i) tokens[i] = (i * 7) % cfg.vocab_size, targets[i] = (i * 5 + 1) % cfg.vocab_size;
  double loss[2];
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    Model m(cfg, *be, bf16 ? ComputeDtype::BF16 : ComputeDtype::F32);
    m.init(3);
    loss[bf16] = m.forward(tokens.data(), targets.data(), 2, 8).loss;
    m.zero_grads();
    m.backward(1.0f);
  }
  CHECK_MSG(std::fabs(loss[1] - loss[0]) / loss[0] < 1e-2,
            "fp32 " + std::to_string(loss[0]) + " bf16 " + std::to_string(loss[1]));
}

TEST(latent_attention_config_is_checked_by_name) {
  ModelConfig m = tiny_deepseek(0, TopkSelection::Plain, RouterScoring::Softmax, false);
  json::Value j = model_config_to_json(m);
  j.set("n_kv_heads", json::Value::of(1));
  try {
    parse_model_config(j);
    CHECK(false);
  } catch (const EngineError& e) {
    CHECK(std::string(e.what()).find("model.n_kv_heads") != std::string::npos);
  }
  j = model_config_to_json(m);
  j.set("router", json::parse(R"({"scoring": "softmax", "selection": "noaux_tc", "n_group": 3})", "test"));
  try {
    parse_model_config(j);
    CHECK(false);
  } catch (const EngineError& e) {
    CHECK(std::string(e.what()).find("model.router.n_group") != std::string::npos);
  }
}

namespace {

json::Value deepseek_hf_config(const std::string& model_type) {
  return json::parse(R"({"model_type": ")" + model_type + R"(", "vocab_size": 64, "hidden_size": 32,
    "intermediate_size": 40, "moe_intermediate_size": 12, "num_hidden_layers": 3, "num_attention_heads": 4,
    "q_lora_rank": null, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 6,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 2, "first_k_dense_replace": 1,
    "n_group": 4, "topk_group": 2, "max_position_embeddings": 64})",
                     "test");
}

void expect_refused(json::Value hf, const std::string& key, const json::Value& value, const std::string& named) {
  hf.set(key, value);
  try {
    hf_to_model_config(hf, "config.json");
    CHECK_MSG(false, key + " = " + json::dump(value) + " was accepted");
  } catch (const EngineError& e) {
    CHECK_MSG(std::string(e.what()).find(named) != std::string::npos, e.what());
  }
}

}  // namespace

TEST(deepseek_configs_import_and_refuse_by_name) {
  const ModelConfig v2 = hf_to_model_config(deepseek_hf_config("deepseek_v2"), "config.json");
  CHECK(v2.latent.enabled() && v2.latent.q_lora_rank == 0 && v2.latent.rope_interleave && !v2.latent.softmax_mscale);
  CHECK(v2.dense_layers == std::vector<int>{0} && v2.n_moe_layers() == 2 && v2.shared_expert_d_ff == 24);
  CHECK(!v2.renormalize && v2.router.selection == TopkSelection::Plain && v2.aux_loss_coef == 0.0);
  const ModelConfig v3 = hf_to_model_config(deepseek_hf_config("deepseek_v3"), "config.json");
  CHECK(v3.router.scoring == RouterScoring::Sigmoid && v3.router.selection == TopkSelection::NoAuxTc);
  CHECK(v3.selection_bias && v3.renormalize && v3.routed_scaling == 2.5 && v3.latent.softmax_mscale);
  CHECK(v3.shared_expert_d_ff == 24);  // n_shared_experts 2 as given, not V3's default of 1
  using json::Value;
  expect_refused(deepseek_hf_config("deepseek_v2"), "topk_method", Value::of("noaux_tc"), "'topk_method'");
  expect_refused(deepseek_hf_config("deepseek_v3"), "topk_method", Value::of("greedy"), "'topk_method'");
  expect_refused(deepseek_hf_config("deepseek_v3"), "scoring_func", Value::of("softmax"), "'scoring_func'");
  expect_refused(deepseek_hf_config("deepseek_v2"), "norm_topk_prob", Value::of(true), "'norm_topk_prob'");
  expect_refused(deepseek_hf_config("deepseek_v2"), "moe_layer_freq", Value::of(2), "'moe_layer_freq'");
  expect_refused(deepseek_hf_config("deepseek_v2"), "num_key_value_heads", Value::of(2), "'num_key_value_heads'");
  expect_refused(deepseek_hf_config("deepseek_v3"), "rope_scaling",
                 json::parse(R"({"rope_type": "dynamic", "factor": 2})", "test"), "'rope_scaling'");
  expect_refused(deepseek_hf_config("deepseek_v2"), "attention_bias", Value::of(true), "'attention_bias'");
}

TEST(tiny_deepseek_model_learns_the_bundled_corpus) {
  const std::string cfg = R"({"model": {"arch": "mixtral", "vocab_size": 256, "d_model": 64, "n_layers": 3,
    "n_heads": 4, "n_kv_heads": 4, "max_seq_len": 64, "d_ff": 128, "expert_d_ff": 32, "shared_expert_d_ff": 64,
    "dense_layers": [0], "n_experts": 8, "top_k": 2, "routed_scaling_factor": 2.5, "selection_bias": true,
    "aux_loss_coef": 0,
    "latent_attention": {"q_lora_rank": 24, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
                         "v_head_dim": 12, "softmax_mscale": true},
    "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 16, "mscale": 0.707,
                     "mscale_all_dim": 0.707},
    "router": {"scoring": "sigmoid", "selection": "noaux_tc", "n_group": 4, "topk_group": 2}},
  "train": {"batch_size": 8, "seq_len": 64, "steps": 150, "lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 10,
            "threads": 2, "seed": 7}})";
  char err[1024] = {};
  moe_engine* e = moe_engine_create(cfg.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  if (!e) return;
  moe_engine_set_data(e, moe_test::corpus_tokens().c_str());
  std::vector<double> losses;
  moe_step_record r{sizeof(moe_step_record)};
  for (int i = 0; i < 150 && moe_engine_step(e, &r) == MOE_OK; ++i) losses.push_back(r.loss);
  moe_engine_destroy(e);
  CHECK(losses.size() == 150);
  if (losses.size() != 150) return;
  double last = 0;
  for (int i = 140; i < 150; ++i) last += losses[i] / 10;
  std::printf("  loss: first %.3f, mean of last 10 %.3f\n", losses[0], last);
  CHECK(losses[0] > 5.0);
  CHECK(last < 3.3);  // below the corpus' byte unigram entropy (3.34 nats)
}

TEST_MAIN()
