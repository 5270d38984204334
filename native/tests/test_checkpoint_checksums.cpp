// Checkpoint integrity: every file the engine writes into a checkpoint is listed in checksums.json with its
// CRC-32 and size; a flipped bit or a truncated file is refused on load (naming the file and both checksums)
// without changing the model, and moe_checkpoint_verify reports the same. Checkpoints without a manifest load.
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/crc32.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "moe_engine.h"
#include "test_files.h"
#include "testing.h"

using moe_test::tmp_path;

namespace {

const char* kConfig = R"({"model": {"arch": "mixtral", "vocab_size": 32, "d_model": 16, "n_layers": 2, "n_heads": 4,
  "n_kv_heads": 2, "max_seq_len": 8, "d_ff": 24, "n_experts": 4, "top_k": 2},
  "train": {"batch_size": 2, "seq_len": 8, "steps": 10, "warmup_steps": 1, "threads": 1}})";

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Engine {
  moe_engine* e = nullptr;
  Engine() {
    char err[1024] = {};
    e = moe_engine_create(kConfig, nullptr, err, sizeof err);
    CHECK_MSG(e != nullptr, err);
  }
  ~Engine() { moe_engine_destroy(e); }
  void train_one_step() {
    std::vector<int32_t> in(16), tgt(16);
    for (int i = 0; i < 16; ++i) in[i] = (i * 7) % 32, tgt[i] = (i * 7 + 1) % 32;
    CHECK(moe_engine_feed_batch(e, in.data(), tgt.data(), 2, 8) == MOE_OK);
    CHECK(moe_engine_step(e, nullptr) == MOE_OK);
  }
  std::vector<float> tensor(const char* name, int which = 0) {
    const char* n = nullptr;
    int32_t rank = 0;
    int64_t dims[8] = {};
    for (int32_t i = 0; i < moe_engine_tensor_count(e); ++i) {
      moe_engine_tensor_info(e, i, &n, &rank, dims);
      if (std::strcmp(n, name) != 0) continue;
      int64_t numel = 1;
      for (int d = 0; d < rank; ++d) numel *= dims[d];
      std::vector<float> out(static_cast<size_t>(numel));
      CHECK(moe_engine_read_tensor(e, name, which, out.data(), numel) == MOE_OK);
      return out;
    }
    CHECK_MSG(false, std::string("no tensor ") + name);
    return {};
  }
};

std::string first_tensor_name(moe_engine* e) {
  const char* n = nullptr;
  int32_t rank = 0;
  int64_t dims[8] = {};
  moe_engine_tensor_info(e, 0, &n, &rank, dims);
  return n;
}

// A checkpoint of one trained step, with a manifest.
std::string saved_checkpoint(const std::string& name) {
  Engine en;
  en.train_one_step();
  const std::string dir = tmp_path(name);
  CHECK(moe_engine_save_checkpoint(en.e, dir.c_str()) == MOE_OK);
  return dir;
}

void flip_bit(const std::string& path, size_t byte_from_end) {
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 1 - byte_from_end] ^= 0x10;
  moe_test::write_raw(path, bytes);
}

std::string verify_error(const std::string& dir) {
  char err[2048] = {};
  const int rc = moe_checkpoint_verify(dir.c_str(), err, sizeof err);
  CHECK(rc == MOE_ERROR);
  return err;
}

}  // namespace

TEST(crc32_matches_zlib) {
  CHECK(moe::crc32("123456789", 9) == 0xCBF43926u);  // the standard check value
  CHECK(moe::crc32("", 0) == 0u);
  const std::string text = "The quick brown fox jumps over the lazy dog, twice over: 0123456789abcdef";
  for (size_t cut = 0; cut <= text.size(); cut += 7)  // continuing over pieces equals one pass
    CHECK(moe::crc32(text.data() + cut, text.size() - cut, moe::crc32(text.data(), cut)) ==
          moe::crc32(text.data(), text.size()));
}

TEST(save_lists_every_file_and_verify_passes) {
  const std::string dir = saved_checkpoint("ok");
  const moe::json::Value m = moe::json::parse(read_bytes(moe::fs::join(dir, "checksums.json")), "checksums.json");
  const moe::json::Value* files = m.find("files");
  CHECK(files != nullptr);
  for (const char* f : {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"}) {
    const moe::json::Value* entry = files->find(f);
    CHECK_MSG(entry != nullptr, std::string("checksums.json lacks ") + f);
    const std::string bytes = read_bytes(moe::fs::join(dir, f));
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", moe::crc32(bytes.data(), bytes.size()));
    CHECK(entry->find("crc32")->string == hex);
    CHECK(entry->find("bytes")->number == static_cast<double>(bytes.size()));
  }
  char err[256] = {};
  CHECK(moe_checkpoint_verify(dir.c_str(), err, sizeof err) == MOE_OK);
  Engine en;
  CHECK(moe_engine_resume_from(en.e, dir.c_str()) == MOE_OK);
  CHECK(moe_engine_step_count(en.e) == 1);
}

TEST(a_flipped_bit_in_the_weights_is_refused_without_changing_the_model) {
  const std::string dir = saved_checkpoint("flip-model");
  flip_bit(moe::fs::join(dir, "model.safetensors"), 3);  // inside the last tensor's data
  const std::string err = verify_error(dir);
  CHECK_MSG(err.find("model.safetensors: checksum mismatch: crc32 ") != std::string::npos, err);
  CHECK_MSG(err.find("use an earlier checkpoint") != std::string::npos, err);

  Engine en;
  const std::string name = first_tensor_name(en.e);
  const std::vector<float> before = en.tensor(name.c_str());
  CHECK(moe_engine_init_from(en.e, dir.c_str()) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(en.e)).find("model.safetensors: checksum mismatch") != std::string::npos);
  CHECK(moe_engine_resume_from(en.e, dir.c_str()) == MOE_ERROR);
  CHECK(en.tensor(name.c_str()) == before);
  CHECK(moe_engine_step_count(en.e) == 0);
}

TEST(a_corrupt_optimizer_state_or_a_truncated_file_is_refused) {
  const std::string dir = saved_checkpoint("flip-optimizer");
  flip_bit(moe::fs::join(dir, "optimizer.safetensors"), 100);
  CHECK(verify_error(dir).find("optimizer.safetensors: checksum mismatch") != std::string::npos);
  Engine en;
  CHECK(moe_engine_resume_from(en.e, dir.c_str()) == MOE_ERROR);
  CHECK(std::string(moe_engine_last_error(en.e)).find("optimizer.safetensors") != std::string::npos);
  CHECK(moe_engine_step_count(en.e) == 0);

  const std::string cut = saved_checkpoint("truncated");
  const std::string path = moe::fs::join(cut, "trainer_state.json");
  const std::string bytes = read_bytes(path);
  moe_test::write_raw(path, bytes.substr(0, bytes.size() - 2));
  const std::string err = verify_error(cut);
  CHECK_MSG(err.find("trainer_state.json: checksum mismatch") != std::string::npos, err);
  CHECK_MSG(err.find(" over " + std::to_string(bytes.size() - 2) + " bytes") != std::string::npos, err);
}

TEST(a_checkpoint_without_a_manifest_loads_unverified) {
  const std::string dir = saved_checkpoint("no-manifest");
  moe::fs::remove_all(moe::fs::join(dir, "checksums.json"));
  char err[256] = {};
  CHECK(moe_checkpoint_verify(dir.c_str(), err, sizeof err) == MOE_FINISHED);
  Engine en;
  CHECK(moe_engine_resume_from(en.e, dir.c_str()) == MOE_OK);
  CHECK(moe_engine_step_count(en.e) == 1);
}

TEST(cleanup) { moe::fs::remove_all(moe_test::tmp_dir()); }

TEST_MAIN()
