// The step record's ABI: a client built against an older (shorter) moe_step_record gets the fields it knows and
// not one byte past its struct_size; a newer (longer) one keeps its unknown tail; a full record has every member
// written; a record without struct_size is refused before a step is taken.
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "moe_engine.h"
#include "testing.h"

namespace {

const char* kConfig = R"({"model": {"arch": "mixtral", "vocab_size": 32, "d_model": 32, "n_layers": 2, "n_heads": 4,
  "n_kv_heads": 2, "max_seq_len": 16, "d_ff": 64, "n_experts": 4, "top_k": 2},
  "train": {"batch_size": 2, "seq_len": 16, "steps": 4, "lr": 1e-3, "threads": 1, "seed": 3}})";

// The first fields of moe_step_record as a client of an earlier version would have declared them.
struct old_step_record {
  uint32_t struct_size;
  int64_t step;
  double loss, aux_loss, lr, grad_norm;
  int64_t tokens;
  double step_ms;
};
static_assert(offsetof(old_step_record, step) == offsetof(moe_step_record, step));
static_assert(offsetof(old_step_record, loss) == offsetof(moe_step_record, loss));
static_assert(offsetof(old_step_record, tokens) == offsetof(moe_step_record, tokens));
static_assert(offsetof(old_step_record, step_ms) == offsetof(moe_step_record, step_ms));

constexpr unsigned char kCanary = 0xA5;

struct Engine {
  moe_engine* e = nullptr;
  Engine() {
    char err[512] = {};
    e = moe_engine_create(kConfig, nullptr, err, sizeof err);
    CHECK_MSG(e != nullptr, err);
  }
  ~Engine() { moe_engine_destroy(e); }
  // Feeds one batch and steps into `out`.
  int step(void* out) {
    std::vector<int32_t> in(32), tg(32);
    for (int i = 0; i < 32; ++i) in[i] = tg[i] = (i * 7) % 32;
    CHECK(moe_engine_feed_batch(e, in.data(), tg.data(), 2, 16) == MOE_OK);
    return moe_engine_step(e, static_cast<moe_step_record*>(out));
  }
};

bool canaries_intact(const unsigned char* from, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (from[i] != kCanary) return false;
  return true;
}

// A full record from a fresh engine: what the older client's prefix must equal.
moe_step_record reference_step() {
  Engine en;
  moe_step_record r{sizeof(moe_step_record)};
  CHECK(en.step(&r) == MOE_OK);
  return r;
}

}  // namespace

TEST(api_version_is_eleven_at_build_and_run_time) {
  // 3: export_hf_with, 4: measure_experts, 5: export format, 6: moe_generation_*, 7: moe_hf_inspect,
  // 8: moe_esft_measure, 9: moe_export_checkpoint, 10: moe_generation_open, 11: base_dir (PEFT adapter folders)
  CHECK(MOE_ENGINE_API_VERSION == 11);
  CHECK(moe_engine_api_version() == MOE_ENGINE_API_VERSION);
}

TEST(an_older_client_gets_its_prefix_and_nothing_past_it) {
  const moe_step_record full = reference_step();
  // Its struct, then canaries; and a struct_size cutting a member in half, which must not be written either.
  for (size_t size : {sizeof(old_step_record), offsetof(moe_step_record, forward_ms) + 4}) {
    alignas(8) unsigned char buf[sizeof(old_step_record) + 64];
    std::memset(buf, kCanary, sizeof buf);
    old_step_record client{};
    client.struct_size = static_cast<uint32_t>(size);
    std::memcpy(buf, &client, sizeof client);
    Engine en;
    CHECK(en.step(buf) == MOE_OK);
    std::memcpy(&client, buf, sizeof client);
    CHECK(client.struct_size == size);
    CHECK(client.step == 1 && client.step == full.step && client.tokens == full.tokens);
    CHECK(std::memcmp(&client.loss, &full.loss, sizeof(double)) == 0);
    CHECK(std::memcmp(&client.grad_norm, &full.grad_norm, sizeof(double)) == 0);
    CHECK(client.step_ms > 0);
    CHECK_MSG(canaries_intact(buf + sizeof(old_step_record), sizeof buf - sizeof(old_step_record)),
              "bytes past struct_size " + std::to_string(size) + " were written");
  }
}

TEST(a_newer_client_keeps_its_unknown_tail) {
  alignas(8) unsigned char buf[sizeof(moe_step_record) + 32];
  std::memset(buf, kCanary, sizeof buf);
  const uint32_t size = sizeof buf;
  std::memcpy(buf, &size, sizeof size);
  Engine en;
  CHECK(en.step(buf) == MOE_OK);
  moe_step_record r;
  std::memcpy(&r, buf, sizeof r);
  CHECK(r.step == 1 && r.n_moe_layers == 2 && r.experts_per_layer != nullptr);
  CHECK(canaries_intact(buf + sizeof(moe_step_record), 32));
}

TEST(a_full_record_has_every_member_written) {
  alignas(8) unsigned char buf[sizeof(moe_step_record)];
  std::memset(buf, kCanary, sizeof buf);
  const uint32_t size = sizeof buf;
  std::memcpy(buf, &size, sizeof size);
  Engine en;
  CHECK(en.step(buf) == MOE_OK);
#define CHECK_WRITTEN(name, ...)                                                                         \
  CHECK_MSG(!canaries_intact(buf + offsetof(moe_step_record, name), sizeof(moe_step_record::name)), \
            "moe_step_record." #name " was not written");
  MOE_STEP_RECORD_FIELDS(CHECK_WRITTEN, CHECK_WRITTEN)
#undef CHECK_WRITTEN
}

TEST(a_record_without_struct_size_is_refused_before_the_step) {
  Engine en;
  moe_step_record r{};
  CHECK(en.step(&r) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(en.e)).find("moe_step_record.struct_size is 0") != std::string::npos);
  CHECK(moe_engine_step_count(en.e) == 0);
  r.struct_size = sizeof r;
  CHECK(moe_engine_step(en.e, &r) == MOE_OK && r.step == 1);
}

TEST_MAIN()
