// The held-out loss (train.eval_every): recorded on the steps it is due and NaN on the others, equal to the
// model's own forward over the held-out windows, and without any effect on training (the same losses and
// weights as a run that never evaluates); refused with offload, by field.
#include <cmath>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/rng.h"
#include "model/config.h"
#include "test_files.h"
#include "testing.h"
#include "train/evaluation.h"
#include "train/token_data.h"
#include "train/trainer.h"

using namespace moe;
using moe_test::tmp_path;

namespace {

std::string shard(const std::string& name, uint64_t seed, size_t n) {
  std::vector<uint32_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<uint32_t>(random_u64(seed, 3, i) % 64);
  const std::string path = tmp_path(name);
  write_token_file(path, tokens, nullptr, 2, 64);
  return path;
}

EngineConfig config(int eval_every) {
  return parse_config_text(R"({"model": {"arch": "mixtral", "vocab_size": 64, "d_model": 32, "n_layers": 2, "n_heads": 4,
      "n_kv_heads": 2, "max_seq_len": 16, "d_ff": 48, "n_experts": 4, "top_k": 2},
    "train": {"batch_size": 2, "seq_len": 16, "steps": 5, "lr": 0.01, "warmup_steps": 1, "threads": 2,
      "eval_every": )" + std::to_string(eval_every) + R"(, "eval_batches": 3}})",
                           "test");
}

}  // namespace

TEST(eval_loss_is_recorded_when_due_and_changes_nothing_else) {
  const std::string train = shard("train.bin", 1, 4000), held = shard("held.bin", 2, 500);
  auto be = make_backend("cpu", {2});
  Trainer plain(config(0), *be), evaluated(config(2), *be);
  plain.model().init(5);
  evaluated.model().init(5);
  plain.set_data(train);
  evaluated.set_data(train);
  evaluated.set_eval_data(held);
  for (int s = 1; s <= 5; ++s) {
    const StepRecord a = plain.step(), b = evaluated.step();
    CHECK(a.loss == b.loss && a.grad_norm == b.grad_norm);  // bit for bit
    CHECK(std::isnan(a.eval_loss));
    CHECK_MSG((s % 2 == 0 || s == 5) ? std::isfinite(b.eval_loss) : std::isnan(b.eval_loss), "step " + std::to_string(s));
  }
  for (size_t i = 0; i < plain.model().num_params(); ++i) CHECK(plain.model().params()[i] == evaluated.model().params()[i]);

  // The value is the model's mean loss over the first eval_batches windows of the held-out shard.
  TokenData data(held);
  std::vector<int32_t> in(32), tg(32);
  double sum = 0;
  int64_t n = 0;
  uint64_t cursor = 0;
  for (int b = 0; b < 3; ++b) {
    cursor = data.next_batch(cursor, 2, 16, in.data(), tg.data());
    const ForwardResult r = plain.model().forward(in.data(), tg.data(), 2, 16);
    sum += r.loss * r.targets;
    n += r.targets;
  }
  CHECK_NEAR(evaluate_loss(evaluated.model(), data, 3, 2, 16), sum / n, 1e-12);
}

TEST(eval_is_refused_with_offload_and_short_data_by_name) {
  moe_test::expect_error(
      [] {
        parse_config_text(R"({"model": {"arch": "mixtral"}, "train": {"eval_every": 10},
                              "offload": {"mode": "host", "expert_slots": 4}})", "test");
      },
      "train.eval_every: evaluation runs with resident experts only", "offload");
  auto be = make_backend("cpu", {2});
  Trainer t(config(2), *be);
  moe_test::expect_error([&] { t.set_eval_data(shard("tiny.bin", 3, 20)); }, "evaluation data holds 20 tokens", "short");
}

TEST_MAIN()
