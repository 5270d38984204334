// gpt-oss as a family: the whole-model finite-difference gradient check of a tiny gpt-oss (attention sinks,
// a sliding window on some layers shorter than the sequence, q/k/v/o, expert and router biases, and the
// clamped SwiGLU with weights large enough that some activations pass its limit), its tensors, and its loss
// falling on the bundled corpus with the byte tokenizer.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/registry.h"
#include "core/error.h"
#include "model/gradcheck.h"
#include "model/model.h"
#include "model/params.h"
#include "moe_engine.h"
#include "testing.h"
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

namespace {

std::string corpus_tokens() {
  const char* src = std::getenv("MOE_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : "..") + "/resources/corpus/python-tutorial.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<uint32_t> tokens(text.begin(), text.end());
  for (auto& t : tokens) t &= 0xFF;
  const auto dir = std::filesystem::temp_directory_path() / "moe_test_gpt_oss_corpus";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tokens.bin").string();
  write_token_file(path, tokens, nullptr, 2, 256);
  return path;
}

}  // namespace

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
  CHECK_MSG(moe_engine_set_data(e, corpus_tokens().c_str()) == MOE_OK, moe_engine_last_error(e));
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

TEST_MAIN()
