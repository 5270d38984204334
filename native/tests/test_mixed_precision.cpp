// train.compute_dtype: fp32 (the default) is untouched, bit for bit; bf16 stays close to fp32 (logits, gradients,
// a short training run on the bundled corpus) and still learns; bf16 is bit-identical for any thread count, and its
// bf16 weight copies follow every change of the fp32 masters.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "core/half.h"
#include "core/json.h"
#include "core/rng.h"
#include "finetune_fixture.h"
#include "model/config.h"
#include "model/model.h"
#include "testing.h"
#include "train/compute_backend.h"
#include "train/token_data.h"
#include "train/trainer.h"

using namespace moe;

namespace {

std::string corpus_tokens() {
  static std::string path;
  if (!path.empty()) return path;
  // ctest sets MOE_SOURCE_DIR; run by hand, the repository is found from this file's path.
  const char* src = std::getenv("MOE_SOURCE_DIR");
  const std::filesystem::path root =
      src ? std::filesystem::path(src) : std::filesystem::path(__FILE__).parent_path() / "../..";
  const std::filesystem::path corpus = root / "resources/corpus/python-tutorial.txt";
  std::ifstream in(corpus, std::ios::binary);
  if (!in) fail("cannot read " + corpus.string() + " (set MOE_SOURCE_DIR to the repository root)");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<uint32_t> tokens(text.begin(), text.end());
  for (auto& t : tokens) t &= 0xFF;
  const auto dir = std::filesystem::temp_directory_path() / "moe_test_mixed_precision";
  std::filesystem::create_directories(dir);
  path = (dir / "tokens.bin").string();
  write_token_file(path, tokens, nullptr, 2, 256);
  return path;
}

// A small run config; `dtype` empty leaves train.compute_dtype out.
EngineConfig config(const std::string& arch, const std::string& dtype, int threads) {
  std::string text = R"({"model": {"arch": ")" + arch +
                     R"(", "vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": )" +
                     (arch == "mixtral" ? "2" : "4") +
                     R"(, "max_seq_len": 64, "d_ff": 128, "n_experts": 4, "top_k": 2, "z_loss_coef": 0.001,
                     "shared_expert_d_ff": 64, "moe_every": 1},
      "train": {"batch_size": 8, "seq_len": 64, "steps": 40, "lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 5,
                "seed": 7, "threads": )" +
                     std::to_string(threads) + (dtype.empty() ? "" : R"(, "compute_dtype": ")" + dtype + "\"") + "}}";
  return parse_config_text(text, "test config");
}

struct Pass {
  double loss = 0;
  std::vector<float> logits, grads;
};

Pass forward_backward(Model& m, uint64_t seed) {
  const int B = 4, T = 32, N = B * T, V = m.config().vocab_size;
  std::vector<int32_t> in(N), tg(N);
  for (int i = 0; i < N; ++i) {
    in[i] = static_cast<int32_t>(random_u64(seed, 1, i) % V);
    tg[i] = static_cast<int32_t>(random_u64(seed, 2, i) % V);
  }
  m.zero_grads();
  Pass p;
  p.loss = m.forward(in.data(), tg.data(), B, T).loss;
  m.backward(1.0f);
  p.logits.resize(size_t(N) * V);
  p.grads.resize(m.num_params());
  m.backend().copy(p.logits.data(), m.logits(), p.logits.size() * sizeof(float));
  m.backend().copy(p.grads.data(), m.grads(), p.grads.size() * sizeof(float));
  return p;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double rel_l2(const float* a, const float* b, size_t n) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) diff += double(a[i] - b[i]) * (a[i] - b[i]), ref += double(b[i]) * b[i];
  return std::sqrt(diff / std::fmax(ref, 1e-30));
}

std::vector<double> train_losses(const EngineConfig& cfg, int steps) {
  auto be = make_backend("cpu", {cfg.train.threads});
  Trainer t(cfg, *be);
  t.set_data(corpus_tokens());
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(t.step().loss);
  return losses;
}

}  // namespace

TEST(compute_dtype_parses_and_fp32_config_json_is_unchanged) {
  CHECK(config("mixtral", "", 2).train.compute_dtype == ComputeDtype::F32);
  CHECK(config("mixtral", "fp32", 2).train.compute_dtype == ComputeDtype::F32);
  CHECK(config("mixtral", "bf16", 2).train.compute_dtype == ComputeDtype::BF16);
  bool rejected = false;
  try {
    config("mixtral", "fp16", 2);
  } catch (const EngineError& e) {
    rejected = std::string(e.what()).find("train.compute_dtype") != std::string::npos;
  }
  CHECK_MSG(rejected, "compute_dtype \"fp16\" must be rejected naming train.compute_dtype");
  CHECK(train_config_to_json(config("mixtral", "fp32", 2).train).find("compute_dtype") == nullptr);
  const json::Value bf16 = train_config_to_json(config("mixtral", "bf16", 2).train);
  CHECK(bf16.find("compute_dtype") && bf16.find("compute_dtype")->string == "bf16");
  CHECK(parse_train_config(bf16).compute_dtype == ComputeDtype::BF16);
}

// fp32 is the default and computes exactly what it did before the option existed: a model built without the
// option and one built with ComputeDtype::F32 agree bit for bit, as do training runs with the field absent and
// "fp32".
TEST(fp32_mode_is_bitwise_unchanged) {
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    const EngineConfig cfg = config(arch, "", 2);
    auto be = make_backend("cpu", {2});
    Model plain(cfg.model, *be), explicit_fp32(cfg.model, *be, ComputeDtype::F32);
    plain.init(3);
    explicit_fp32.init(3);
    const Pass a = forward_backward(plain, 5), b = forward_backward(explicit_fp32, 5);
    CHECK_MSG(a.loss == b.loss && bits_equal(a.logits, b.logits) && bits_equal(a.grads, b.grads), arch);
    const std::vector<double> absent = train_losses(config(arch, "", 2), 4);
    const std::vector<double> named = train_losses(config(arch, "fp32", 2), 4);
    CHECK_MSG(absent == named, std::string(arch) + ": training losses differ between no compute_dtype and fp32");
  }
}

// Same weights and batch: bf16 logits within 1% (relative L2) of fp32, the loss within 0.5%, and every weight
// gradient within 5% (the router's included: it is fp32 but sees bf16-computed activations).
TEST(bf16_forward_and_gradients_track_fp32) {
  std::printf("  %s\n", make_backend("cpu", {2})->describe().c_str());
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    const EngineConfig cfg = config(arch, "", 2);
    auto be = make_backend("cpu", {2});
    Model m32(cfg.model, *be), m16(cfg.model, *be, ComputeDtype::BF16);
    m32.init(11);
    m16.init(11);
    const Pass a = forward_backward(m32, 9), b = forward_backward(m16, 9);
    const double logit_err = rel_l2(b.logits.data(), a.logits.data(), a.logits.size());
    CHECK_MSG(logit_err < 1e-2, std::string(arch) + ": logits relative L2 error " + std::to_string(logit_err));
    CHECK_MSG(std::fabs(b.loss - a.loss) < 5e-3 * a.loss,
              std::string(arch) + ": loss " + std::to_string(b.loss) + " vs fp32 " + std::to_string(a.loss));
    CHECK_MSG(!bits_equal(a.logits, b.logits), std::string(arch) + ": bf16 mode computed exactly fp32");
    double worst_grad = 0;
    for (const ParamTensor& t : m32.layout().tensors()) {
      const double err = rel_l2(b.grads.data() + t.offset, a.grads.data() + t.offset, t.numel);
      worst_grad = std::fmax(worst_grad, err);
      CHECK_MSG(err < 5e-2,
                std::string(arch) + ": gradient of " + t.name + " relative L2 error " + std::to_string(err));
    }
    std::printf("  %s: relative L2 error of bf16 against fp32: logits %.2e, loss %.2e, worst gradient tensor %.2e\n",
                arch, logit_err, std::fabs(b.loss - a.loss) / a.loss, worst_grad);
  }
}

// 40 AdamW steps (lr 3e-3) on the bundled corpus. The runs agree to 5e-3 nats over the first 10 steps; after that
// the weights have drifted apart (a chaotic trajectory, as any change of rounding would cause) and single batches
// differ by up to a few 1e-2 nats against a batch-to-batch spread of ~0.3, so later steps are held to 0.1 each and
// the mean of the last 10 to 0.03. Both must learn: the last 10 steps average more than 1.5 nats below step 1.
TEST(bf16_training_tracks_fp32_and_learns) {
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    const std::vector<double> l32 = train_losses(config(arch, "fp32", 2), 40);
    const std::vector<double> l16 = train_losses(config(arch, "bf16", 2), 40);
    double early = 0, worst = 0, tail32 = 0, tail16 = 0;
    for (size_t s = 0; s < l32.size(); ++s) {
      const double d = std::fabs(l16[s] - l32[s]);
      if (s < 10) early = std::fmax(early, d);
      worst = std::fmax(worst, d);
      if (s >= 30) tail32 += l32[s] / 10, tail16 += l16[s] / 10;
    }
    std::printf("  %s: loss %.4f -> last-10 mean %.4f (fp32) / %.4f -> %.4f (bf16); largest difference %.4f over the "
                "first 10 steps, %.4f over all 40\n",
                arch, l32[0], tail32, l16[0], tail16, early, worst);
    CHECK_MSG(early < 5e-3, std::string(arch) + ": bf16 loss strays " + std::to_string(early) + " in 10 steps");
    CHECK_MSG(worst < 0.1, std::string(arch) + ": bf16 loss strays " + std::to_string(worst) + " nats from fp32");
    CHECK_MSG(std::fabs(tail16 - tail32) < 0.03, std::string(arch) + ": last-10 mean loss " + std::to_string(tail16) +
                                                     " vs fp32 " + std::to_string(tail32));
    CHECK_MSG(tail16 < l16[0] - 1.5, std::string(arch) + ": bf16 training did not learn");
  }
}

TEST(bf16_bit_identical_across_thread_counts) {
  for (const char* arch : {"mixtral", "gpt-moe"}) {
    std::vector<Pass> passes;
    std::vector<std::vector<double>> runs;
    for (int threads : {1, 2, 3}) {
      const EngineConfig cfg = config(arch, "bf16", threads);
      auto be = make_backend("cpu", {threads});
      Model m(cfg.model, *be, ComputeDtype::BF16);
      m.init(13);
      passes.push_back(forward_backward(m, 17));
      runs.push_back(train_losses(cfg, 5));
    }
    for (size_t i = 1; i < passes.size(); ++i) {
      CHECK_MSG(bits_equal(passes[0].logits, passes[i].logits) && bits_equal(passes[0].grads, passes[i].grads),
                std::string(arch) + ": forward/backward differs between 1 thread and " + std::to_string(i + 1));
      CHECK_MSG(runs[0] == runs[i], std::string(arch) + ": training losses differ between 1 thread and " +
                                        std::to_string(i + 1));
    }
  }
}

// After an optimizer step (or any write through params()), the next forward uses bf16 copies of the new masters:
// the trained model's logits equal those of a fresh bf16 model given the same fp32 weights.
TEST(bf16_weight_copies_follow_the_masters) {
  const EngineConfig cfg = config("mixtral", "bf16", 2);
  auto be = make_backend("cpu", {2});
  Trainer t(cfg, *be);
  t.set_data(corpus_tokens());
  for (int s = 0; s < 3; ++s) t.step();
  Model fresh(cfg.model, *be, ComputeDtype::BF16);
  be->copy(fresh.params(), t.model().params(), t.model().num_params() * sizeof(float));
  const Pass a = forward_backward(t.model(), 21), b = forward_backward(fresh, 21);
  CHECK(bits_equal(a.logits, b.logits) && bits_equal(a.grads, b.grads));

  // Writing a master weight changes the next forward.
  const ParamTensor* w = fresh.layout().find("layers.0.moe.experts.0.gate_up.weight");
  std::vector<float> scaled(w->numel);
  be->copy(scaled.data(), fresh.params() + w->offset, w->numel * sizeof(float));
  for (float& x : scaled) x *= 2.0f;
  be->copy(fresh.params() + w->offset, scaled.data(), w->numel * sizeof(float));
  CHECK(!bits_equal(forward_backward(fresh, 21).logits, b.logits));
}

// The optimizer writes the trained weights' bf16 copies with its update (Backend::adamw_update_bf16): right after a
// step every copy is its master rounded, with no refresh in between, and the next forward, which then converts
// nothing, equals a fresh model's on the same weights.
TEST(optimizer_writes_the_bf16_copies_with_the_weights) {
  const EngineConfig cfg = config("mixtral", "bf16", 2);
  auto be = make_backend("cpu", {2});
  Trainer t(cfg, *be);
  t.set_data(corpus_tokens());
  for (int s = 0; s < 2; ++s) t.step();
  // Read through the const pointers: params() would mark every copy stale and hide a copy left unwritten.
  const ModelParams& p = t.model().param_ptrs();
  int64_t checked = 0, wrong = 0;
  auto check_copy = [&](const float* w, const uint16_t* w16, size_t n) {
    for (size_t i = 0; i < n; ++i, ++checked) wrong += w16[i] != f32_to_bf16(w[i]);
  };
  const ModelConfig& mc = cfg.model;
  const size_t C = mc.d_model, F = mc.expert_d_ff;
  for (const LayerParams& l : p.layers) {
    check_copy(l.out_w, l.out_w_bf16, C * C);
    for (const FfnParams& e : l.experts) {
      check_copy(e.w_in, e.w_in_bf16, 2 * F * C);
      check_copy(e.w_out, e.w_out_bf16, C * F);
    }
  }
  std::printf("  %lld weights checked, %lld copies differ from their master\n", (long long)checked, (long long)wrong);
  CHECK(checked > 0 && wrong == 0);

  Model fresh(cfg.model, *be, ComputeDtype::BF16);
  const ParamTensor* any = fresh.layout().find("layers.0.moe.experts.0.gate_up.weight");
  be->copy(fresh.params(), p.layers[0].experts[0].w_in - any->offset, t.model().num_params() * sizeof(float));
  const Pass a = forward_backward(t.model(), 22), b = forward_backward(fresh, 22);
  CHECK(bits_equal(a.logits, b.logits) && bits_equal(a.grads, b.grads));
}

// Frozen weights' bf16 copies kept by the backend (packed once, Backend::keep_bf16_weights) change no bit: every
// family shape, full training (nothing frozen) and LoRA on a frozen base (latent attention reads a slice of one
// weight as a weight of its own), against a backend that packs every weight on every call; then a checkpoint-style
// write of the frozen masters must reach the kept copies too. A kept copy read stale, or a slice read through its
// parent's packing, changes bits here.
TEST(kept_bf16_weights_change_no_bits) {
  const std::string lora = R"({"method": "lora", "lora": {"rank": 4, "alpha": 8,
      "targets": ["attention", "experts", "shared_experts", "dense_mlp"]}})";
  std::vector<int32_t> in(32), tg(32);
  for (int i = 0; i < 32; ++i) in[i] = int32_t(random_u64(3, 1, i) % 64), tg[i] = int32_t(random_u64(3, 2, i) % 64);
  for (const auto& [name, model] : finetune_test::families())
    for (bool frozen_base : {false, true}) {
      EngineConfig cfg = parse_config_text(finetune_test::config(model, frozen_base ? lora : ""), "test config");
      cfg.train.compute_dtype = ComputeDtype::BF16;
      std::vector<double> losses[2];
      std::vector<float> params[2], logits[2];
      int64_t kept = 0;
      for (int pack = 0; pack < 2; ++pack) {
        BackendOptions bo;
        bo.threads = 2, bo.pack_bf16_weights = pack == 1;
        auto be = make_backend("cpu", bo);
        Trainer t(cfg, *be);
        for (int s = 0; s < 4; ++s) {
          t.feed_batch(in.data(), tg.data(), 2, 16);
          losses[pack].push_back(t.step().loss);
        }
        if (pack) kept = be->kept_bf16_bytes();
        // Every master scaled, frozen ones included, as a checkpoint load writes them.
        Model& m = t.model();
        std::vector<float> p(m.num_params());
        be->copy(p.data(), m.params(), p.size() * sizeof(float));
        params[pack] = p;
        for (float& x : p) x *= 0.5f;
        be->copy(m.params(), p.data(), p.size() * sizeof(float));
        m.forward(in.data(), nullptr, 2, 16);
        logits[pack].assign(m.logits(), m.logits() + 32 * m.config().vocab_size);
      }
      const std::string what = name + (frozen_base ? " LoRA" : " full");
      CHECK_MSG(losses[0] == losses[1], what + ": losses differ with kept bf16 weights");
      CHECK_MSG(bits_equal(params[0], params[1]), what + ": parameters differ with kept bf16 weights");
      CHECK_MSG(bits_equal(logits[0], logits[1]), what + ": logits after a write of the masters differ");
      CHECK_MSG(frozen_base == (kept > 0), what + ": " + std::to_string(kept) + " bytes kept");
    }
}

// The frozen weights are packed once the model writes them, not each at its first use: a first step whose tokens
// all route to the same experts already holds every expert's packed weights, and steps that route everywhere add
// nothing (a sparse MoE would otherwise pack some experts in each of its early steps).
TEST(frozen_bf16_weights_are_packed_before_their_first_use) {
  const std::string lora = R"({"method": "lora", "lora": {"rank": 4, "alpha": 8, "targets": ["experts"]}})";
  EngineConfig cfg = parse_config_text(finetune_test::config(finetune_test::families()[1].second, lora), "test config");
  cfg.train.compute_dtype = ComputeDtype::BF16;
  BackendOptions bo;
  bo.threads = 2;
  auto be = make_backend("cpu", bo);
  Trainer t(cfg, *be);
  std::vector<int32_t> same(32, 5), in(32), tg(32);
  for (int i = 0; i < 32; ++i) in[i] = int32_t(random_u64(3, 1, i) % 64), tg[i] = int32_t(random_u64(3, 2, i) % 64);
  t.feed_batch(same.data(), tg.data(), 2, 16);
  t.step();
  const int64_t first = be->kept_bf16_bytes();
  for (int s = 0; s < 3; ++s) {
    t.feed_batch(in.data(), tg.data(), 2, 16);
    t.step();
  }
  CHECK_MSG(first > 0 && be->kept_bf16_bytes() == first,
            std::to_string(first) + " bytes kept after the first step, " + std::to_string(be->kept_bf16_bytes()) +
                " after three more");
}

// train.pack_frozen_bf16 false: the engine's backend keeps nothing (every call packs), and the setting survives the
// config's JSON; the default (true) is left out of it.
TEST(pack_frozen_bf16_false_keeps_nothing) {
  const std::string lora = R"({"method": "lora", "lora": {"rank": 4, "alpha": 8, "targets": ["experts"]}})";
  std::vector<int32_t> in(32, 5), tg(32, 7);
  for (bool pack : {true, false}) {
    std::string text = finetune_test::config(finetune_test::families()[1].second, lora);
    text.replace(text.find(R"("train": {)"), 10,
                 std::string(R"("train": {"compute_dtype": "bf16", )") + (pack ? "" : R"("pack_frozen_bf16": false, )"));
    const EngineConfig cfg = parse_config_text(text, "test config");
    CHECK(cfg.train.pack_frozen_bf16 == pack);
    const std::string json = json::dump(train_config_to_json(cfg.train));
    CHECK_MSG((json.find("\"pack_frozen_bf16\":false") != std::string::npos) == !pack, json);
    auto be = make_compute_backend(cfg.train);
    Trainer t(cfg, *be);
    t.feed_batch(in.data(), tg.data(), 2, 16);
    t.step();
    CHECK_MSG((be->kept_bf16_bytes() > 0) == pack, std::to_string(be->kept_bf16_bytes()) + " bytes kept");
  }
}

TEST_MAIN()
