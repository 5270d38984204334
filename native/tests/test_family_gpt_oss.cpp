// gpt-oss as a family: the whole-model finite-difference gradient check of a tiny gpt-oss (attention sinks,
// a sliding window on some layers shorter than the sequence, q/k/v/o, expert and router biases, and the
// clamped SwiGLU with weights large enough that some activations pass its limit), its tensors, and its loss
// falling on the bundled corpus with the byte tokenizer.
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>

#include "backend/registry.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "model/gradcheck.h"
#include "model/model.h"
#include "model/params.h"
#include "moe_engine.h"
#include "test_files.h"
#include "testing.h"
#include "train/hf_interchange.h"
#include "train/mxfp4.h"
#include "train/token_data.h"

using namespace moe;

namespace {

ModelConfig tiny_gpt_oss() {
  ModelConfig m = parse_model_config(json::parse(R"({"arch": "gpt-oss", "vocab_size": 32, "d_model": 16,
      "n_layers": 3, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "max_seq_len": 8, "d_ff": 12, "n_experts": 4,
      "top_k": 2, "sliding_window": 3, "sliding_layers": [0, 2], "swiglu_limit": 2.5, "z_loss_coef": 0.01,
      "init_std": 0.3})"));
  return m;
}

}  // namespace

TEST(gpt_oss_has_sinks_biases_and_windows) {
  const ModelConfig m = tiny_gpt_oss();
  const ParamLayout layout(m);
  for (const char* name : {"layers.0.attn.sinks", "layers.0.attn.qkv.bias", "layers.0.attn.out.bias",
                           "layers.0.moe.router.bias", "layers.0.moe.experts.3.gate_up.bias",
                           "layers.0.moe.experts.3.down.bias"})
    CHECK_MSG(layout.find(name) != nullptr, name);
  CHECK(layout.find("layers.0.norm1.bias") == nullptr);
  CHECK(m.window_at(0) == 3 && m.window_at(1) == 0 && m.window_at(2) == 3);
  const ModelParams p = layout.bind(nullptr);
  CHECK(p.layers[0].window == 3 && p.layers[1].window == 0);
  // The config round-trips through its JSON.
  const ModelConfig back = parse_model_config(model_config_to_json(m));
  CHECK(back.sliding_window == 3 && back.sliding_layers == m.sliding_layers && back.swiglu_limit == 2.5);
}

TEST(gpt_oss_config_errors_name_the_field) {
  auto rejects = [](const std::string& model, const std::string& needle) {
    try {
      parse_model_config(json::parse(model));
      CHECK_MSG(false, "accepted " + model);
    } catch (const EngineError& e) {
      CHECK_MSG(std::string(e.what()).find(needle) != std::string::npos, std::string(e.what()) + " lacks " + needle);
    }
  };
  rejects(R"({"arch": "gpt-oss", "n_layers": 2, "sliding_window": 4})", "model.sliding_layers");
  rejects(R"({"arch": "gpt-oss", "n_layers": 2, "sliding_layers": [1]})", "model.sliding_window");
  rejects(R"({"arch": "gpt-oss", "n_layers": 2, "sliding_window": 4, "sliding_layers": [1, 1]})",
          "model.sliding_layers[1]");
  rejects(R"({"arch": "gpt-moe", "n_layers": 2, "sliding_window": 4, "sliding_layers": [0]})",
          "model.sliding_window: needs rotary positions");
}

TEST(gpt_oss_whole_model_gradients) {
  const ModelConfig cfg = tiny_gpt_oss();
  auto be = make_backend("cpu", {2});
  // T = 8 > window 3, so the window masks keys; init_std 0.3 and limit 2.5 put some activations past the clamp.
  auto report = model_gradcheck(cfg, *be, 2, 8, 10, 1e-2f, 5, /*skip_kinks=*/true);
  int checked = 0;
  bool saw_sinks = false, saw_router_bias = false;
  for (const auto& t : report) {
    checked += t.samples;
    std::printf("    %-40s %d samples, worst %.2e\n", t.name.c_str(), t.samples, t.worst_rel_err);
    saw_sinks |= t.name.find("attn.sinks") != std::string::npos && t.samples > 0;
    saw_router_bias |= t.name.find("router.bias") != std::string::npos && t.samples > 0;
    CHECK_MSG(t.worst_rel_err <= 3e-2, t.name + " gradient error " + std::to_string(t.worst_rel_err));
  }
  CHECK(saw_sinks && saw_router_bias);
  CHECK_MSG(checked > 100, "too few coordinates checked");
}

TEST(gpt_oss_loss_falls_on_the_corpus) {
  const std::string cfg = R"({"model": {"arch": "gpt-oss", "vocab_size": 256, "d_model": 64, "n_layers": 2,
      "n_heads": 4, "n_kv_heads": 2, "head_dim": 16, "max_seq_len": 64, "d_ff": 64, "n_experts": 4, "top_k": 2,
      "sliding_window": 16, "sliding_layers": [0], "z_loss_coef": 0.001},
    "train": {"batch_size": 8, "seq_len": 64, "steps": 150, "lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 10,
      "threads": 2, "seed": 7}})";
  char err[1024] = {};
  moe_engine* e = moe_engine_create(cfg.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  if (!e) return;
  CHECK_MSG(moe_engine_set_data(e, moe_test::corpus_tokens().c_str()) == MOE_OK, moe_engine_last_error(e));
  std::vector<double> losses;
  moe_step_record r{sizeof(moe_step_record)};
  for (int i = 0; i < 150; ++i) {
    if (moe_engine_step(e, &r) != MOE_OK) {
      CHECK_MSG(false, std::string("step failed: ") + moe_engine_last_error(e));
      break;
    }
    losses.push_back(r.loss);
  }
  moe_engine_destroy(e);
  CHECK(losses.size() == 150);
  if (losses.size() < 20) return;
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += losses[i] / 10, last += losses[losses.size() - 10 + i] / 10;
  std::printf("  loss: mean of first 10 %.3f, of last 10 %.3f\n", first, last);
  CHECK(last < first - 1.5);
}

TEST(mxfp4_decodes_every_code_and_scale_exactly) {
  // The FP4 E2M1 table, by hand: codes 0-7 are +0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8-15 their negatives.
  const float table[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                           -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int code = 0; code < 16; ++code) {
    CHECK(fp4_e2m1_value(static_cast<uint8_t>(code)) == table[code]);
    CHECK(std::signbit(fp4_e2m1_value(static_cast<uint8_t>(code))) == (code >= 8));
  }
  // Four groups of 16 bytes; byte i of every group holds code i in its low nibble and 15 - i in its high one.
  std::vector<uint8_t> blocks(4 * 16);
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 16; ++i) blocks[g * 16 + i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  const uint8_t scales[4] = {127, 130, 125, 0};  // ×1, ×8, ×1/4, ×2^-127
  std::vector<float> out(4 * 32);
  mxfp4_decode(blocks.data(), scales, 2, 2, out.data());
  const float factor[4] = {1.0f, 8.0f, 0.25f, std::ldexp(1.0f, -127)};
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 16; ++i) {
      CHECK(out[g * 32 + 2 * i] == table[i] * factor[g]);            // low nibble first
      CHECK(out[g * 32 + 2 * i + 1] == table[15 - i] * factor[g]);   // then the high one
    }
  // A few by hand. Group 1 (×8), byte 1 = 0xE1: low code 1 (0.5) and high code 14 (-4) give 4 and -32.
  CHECK(out[1 * 32 + 2] == 4.0f && out[1 * 32 + 3] == -32.0f);
  // At scale 130, 0x71 is (0.5, 6) × 8 = (4, 48) and 0xC3 is (1.5, -2) × 8 = (12, -16).
  const uint8_t b2[16] = {0x71, 0xC3};
  const uint8_t s130 = 130;
  float o2[32];
  mxfp4_decode(b2, &s130, 1, 1, o2);
  CHECK(o2[0] == 4.0f && o2[1] == 48.0f && o2[2] == 12.0f && o2[3] == -16.0f);
  CHECK(out[3 * 32 + 2] == std::ldexp(1.0f, -128));  // 0.5 × 2^-127: a subnormal float, exact
}

TEST(export_options_pick_the_expert_layout_and_old_clients_get_the_default) {
  const std::string cfg = R"({"model": {"arch": "gpt-oss", "vocab_size": 32, "d_model": 16, "n_layers": 2,
      "n_heads": 4, "n_kv_heads": 2, "max_seq_len": 8, "d_ff": 8, "n_experts": 4, "top_k": 2},
    "train": {"batch_size": 1, "seq_len": 8, "threads": 1}})";
  char err[1024] = {};
  moe_engine* e = moe_engine_create(cfg.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  if (!e) return;
  const auto dir = std::filesystem::temp_directory_path() / "moe_test_gpt_oss_export";
  std::filesystem::remove_all(dir);
  // An options struct as a client that predates expert_layout fills it: the type's default (fused for gpt_oss).
  moe_export_options old{};
  old.struct_size = offsetof(moe_export_options, expert_layout);
  old.dtype = MOE_EXPORT_BF16;
  old.expert_layout = MOE_EXPERTS_PER_EXPERT;  // beyond struct_size: must be ignored
  CHECK_MSG(moe_engine_export_hf_with(e, (dir / "a").c_str(), "gpt_oss", &old) == MOE_OK, moe_engine_last_error(e));
  const st::TensorSet ts((dir / "a").string());
  CHECK(ts.find("model.layers.0.mlp.experts.gate_up_proj") != nullptr);
  CHECK(ts.find("model.layers.0.self_attn.sinks") != nullptr && ts.find("model.layers.1.mlp.router.bias") != nullptr);
  moe_export_options per{};
  per.struct_size = sizeof per;
  per.expert_layout = MOE_EXPERTS_PER_EXPERT;
  CHECK(moe_engine_export_hf_with(e, (dir / "b").c_str(), "gpt_oss", &per) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(e)).find("\"per-expert\" does not exist for gpt-oss") != std::string::npos);
  // The export's config carries the window, the layer types and the clamp, and no quantization.
  const json::Value hf = json::parse(fs::read_file((dir / "a" / "config.json").string(), 1 << 20), "config.json");
  CHECK(hf.find("sliding_window") && hf.find("sliding_window")->is_null());
  CHECK(hf.find("swiglu_limit")->number == 7.0 && !hf.find("quantization_config"));
  CHECK(hf.find("torch_dtype")->string == "bfloat16");
  moe_engine_destroy(e);
}

TEST(gpt_oss_config_import_refuses_what_it_cannot_match) {
  const std::string base = R"("model_type": "gpt_oss", "vocab_size": 32, "hidden_size": 16, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 8,
      "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4)";
  auto rejects = [&](const std::string& extra, const std::string& needle) {
    try {
      hf_to_model_config(json::parse("{" + base + extra + "}"), "config.json");
      CHECK_MSG(false, "accepted " + extra);
    } catch (const EngineError& e) {
      CHECK_MSG(std::string(e.what()).find(needle) != std::string::npos, std::string(e.what()) + " lacks " + needle);
    }
  };
  // A missing rope_scaling is the config class's YaRN; an explicit one is read; another rope type is refused.
  const ModelConfig absent = hf_to_model_config(json::parse("{" + base + "}"), "config.json");
  CHECK(absent.rope_scaling.type == RopeScalingType::Yarn && absent.rope_scaling.factor == 32.0 &&
        absent.rope_scaling.original_max_position_embeddings == 4096 && !absent.rope_scaling.truncate);
  const ModelConfig given = hf_to_model_config(
      json::parse("{" + base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 16.0})" + "}"),
      "config.json");
  CHECK(given.rope_scaling.factor == 8.0 && given.rope_scaling.beta_fast == 16.0 && given.rope_scaling.truncate);
  rejects(R"(, "rope_scaling": {"rope_type": "linear", "factor": 2.0})", "only \"yarn\"");
  rejects(R"(, "rope_scaling": null, "attention_bias": false)", "'attention_bias' is false");
  // Methods the import cannot decode exactly are refused by name (FP8 and MXFP4 are decoded).
  rejects(R"(, "rope_scaling": null, "quantization_config": {"quant_method": "gptq"})", "'quantization_config'");
  rejects(R"(, "rope_scaling": null, "quantization_config": {"quant_method": "fp8", "fmt": "e5m2"})", "\"e4m3\"");
  rejects(R"(, "rope_scaling": null, "layer_types": ["sliding_attention"])", "'layer_types' must list one");
  const ModelConfig m = hf_to_model_config(
      json::parse("{" + base + R"(, "rope_scaling": null, "quantization_config": {"quant_method": "mxfp4"}})"),
      "config.json");
  // Without layer_types: transformers' default, sliding on even layers.
  CHECK(m.family == "gpt-oss" && m.head_dim == 8 && m.sliding_window == 4 && m.sliding_layers == std::vector<int>{0});
  CHECK(m.swiglu_limit == 7.0 && m.swiglu_alpha == 1.702 && m.qkv_bias && m.rope_theta == 150000.0);
}

TEST_MAIN()
