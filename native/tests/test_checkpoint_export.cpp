// Exporting one of our checkpoints without an engine (moe_export_checkpoint): each tensor streams from the
// checkpoint's file, and the folder written is byte for byte what an engine loaded from the checkpoint exports
// (F32 per-expert, BF16 fused, F16, a LoRA run merged and as its PEFT adapter). A corrupt or mismatched checkpoint
// is refused by name and nothing is written, as is a target that holds anything (the source itself above all); a
// Hugging Face folder goes through a model whose experts stream through an SSD-tier file beside the output.
#include <filesystem>
#include <string>
#include <vector>

#include "core/fsutil.h"
#include "include/moe_engine.h"
#include "test_files.h"
#include "testing.h"

namespace {

const std::string kModel = R"("model": {"arch": "mixtral", "vocab_size": 64, "d_model": 32, "n_heads": 2,
  "n_kv_heads": 1, "n_layers": 2, "n_experts": [4, 4], "max_seq_len": 16, "d_ff": 48, "expert_d_ff": 24, "top_k": 2})";
const std::string kLora = R"(, "finetune": {"method": "lora", "lora": {"rank": 4, "alpha": 8}})";

// A checkpoint of a run trained 2 steps (so a LoRA run's adapters are not their start values).
std::string trained_checkpoint(const std::string& name, const std::string& finetune) {
  const std::string config = "{" + kModel + R"(, "train": {"batch_size": 2, "seq_len": 16, "steps": 10, "lr": 0.01,
    "threads": 1, "seed": 3})" + finetune + "}";
  char err[512] = {0};
  moe_engine* e = moe_engine_create(config.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  std::vector<int32_t> in(32), tg(32);
  for (int i = 0; i < 32; ++i) in[i] = tg[i] = (i * 5 + 1) % 64;
  moe_step_record r{sizeof(moe_step_record)};
  for (int s = 0; s < 2; ++s) {
    CHECK(moe_engine_feed_batch(e, in.data(), tg.data(), 2, 16) == MOE_OK);
    CHECK(moe_engine_step(e, &r) == MOE_OK);
  }
  const std::string dir = moe_test::tmp_path(name);
  moe::fs::remove_all(dir);
  CHECK_MSG(moe_engine_save_checkpoint(e, dir.c_str()) == MOE_OK, moe_engine_last_error(e));
  moe_engine_destroy(e);
  return dir;
}

std::string folder_bytes(const std::string& dir) {
  std::string all;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    all += f.path().filename().string() + ":" + moe::fs::read_file(f.path().string(), 1ull << 30) + ";";
  return all;
}

moe_export_options options(int dtype, int layout, int format) {
  moe_export_options o{};
  o.struct_size = sizeof o;
  o.dtype = dtype;
  o.expert_layout = layout;
  o.format = format;
  return o;
}

// What an engine loaded from the checkpoint exports, as the CLI used to.
std::string engine_export(const std::string& ckpt, const moe_export_options& o, const std::string& out) {
  char err[512] = {0};
  moe_engine* e = moe_engine_create(R"({"train": {"seq_len": 1, "batch_size": 1}})", ckpt.c_str(), err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  CHECK(moe_engine_init_from(e, ckpt.c_str()) == MOE_OK);
  moe::fs::remove_all(out);
  CHECK_MSG(moe_engine_export_hf_with(e, out.c_str(), "mixtral", &o) == MOE_OK, moe_engine_last_error(e));
  moe_engine_destroy(e);
  return folder_bytes(out);
}

}  // namespace

TEST(checkpoint_exports_stream_the_engines_bytes) {
  struct Case {
    const char* what;
    std::string finetune;
    moe_export_options o;
  };
  const std::string full = trained_checkpoint("export-full", ""), lora = trained_checkpoint("export-lora", kLora);
  const int whole = MOE_EXPORT_CHECKPOINT, any = MOE_EXPERTS_DEFAULT;
  for (const Case& c : {Case{"f32 per-expert", "", options(MOE_EXPORT_F32, MOE_EXPERTS_PER_EXPERT, whole)},
                        Case{"bf16 fused", "", options(MOE_EXPORT_BF16, MOE_EXPERTS_FUSED, whole)},
                        Case{"f16", "", options(MOE_EXPORT_F16, any, whole)},
                        Case{"LoRA merged", kLora, options(MOE_EXPORT_BF16, any, whole)},
                        Case{"LoRA adapter", kLora, options(MOE_EXPORT_F32, any, MOE_EXPORT_ADAPTER)}}) {
    const std::string& ckpt = c.finetune.empty() ? full : lora;
    const std::string want = engine_export(ckpt, c.o, moe_test::tmp_path("export-engine"));
    const std::string out = moe_test::tmp_path("export-streamed");
    moe::fs::remove_all(out);
    char err[512] = {0};
    CHECK_MSG(moe_export_checkpoint(ckpt.c_str(), out.c_str(), "mixtral", &c.o, err, sizeof err) == MOE_OK, err);
    CHECK_MSG(folder_bytes(out) == want, std::string(c.what) + ": the streamed export differs from the engine's");
  }
  // A Hugging Face folder as the source: its experts go through an SSD-tier file beside the output (removed after),
  // and it exports again the same, also by way of the fused layout.
  const std::string hf = moe_test::tmp_path("export-streamed"), again = moe_test::tmp_path("export-again");
  const moe_export_options f32 = options(MOE_EXPORT_F32, MOE_EXPERTS_DEFAULT, MOE_EXPORT_CHECKPOINT);
  moe::fs::remove_all(hf);
  moe::fs::remove_all(again);
  char err[512] = {0};
  CHECK_MSG(moe_export_checkpoint(full.c_str(), hf.c_str(), "mixtral", &f32, err, sizeof err) == MOE_OK, err);
  // What an export to the same folder left when its process died (no process has that id) goes first.
  const std::string left = moe_test::tmp_path(".export-again.experts-999999999");
  std::filesystem::create_directories(left);
  moe_test::write_raw(left + "/experts.bin", std::string(4096, '\0'));
  CHECK_MSG(moe_export_checkpoint(hf.c_str(), again.c_str(), "mixtral", &f32, err, sizeof err) == MOE_OK, err);
  CHECK(!std::filesystem::exists(left));
  CHECK(moe::fs::read_file(moe::fs::join(hf, "model.safetensors"), 1 << 30) ==
        moe::fs::read_file(moe::fs::join(again, "model.safetensors"), 1 << 30));
  const std::string fused = moe_test::tmp_path("export-fused"), back = moe_test::tmp_path("export-back");
  moe::fs::remove_all(fused);
  moe::fs::remove_all(back);
  const moe_export_options as_fused = options(MOE_EXPORT_F32, MOE_EXPERTS_FUSED, MOE_EXPORT_CHECKPOINT);
  CHECK_MSG(moe_export_checkpoint(again.c_str(), fused.c_str(), "mixtral", &as_fused, err, sizeof err) == MOE_OK, err);
  CHECK(moe::fs::read_file(moe::fs::join(fused, "model.safetensors"), 1 << 30) !=
        moe::fs::read_file(moe::fs::join(hf, "model.safetensors"), 1 << 30));
  CHECK_MSG(moe_export_checkpoint(fused.c_str(), back.c_str(), "mixtral", &f32, err, sizeof err) == MOE_OK, err);
  CHECK(moe::fs::read_file(moe::fs::join(hf, "model.safetensors"), 1 << 30) ==
        moe::fs::read_file(moe::fs::join(back, "model.safetensors"), 1 << 30));
  for (const auto& e : std::filesystem::directory_iterator(moe_test::tmp_dir()))
    CHECK_MSG(e.path().filename().string().find(".experts-") == std::string::npos,
              e.path().string() + ": an export's SSD-tier directory was left behind");
}

TEST(checkpoint_export_refuses_bad_checkpoints_and_writes_nothing) {
  const std::string full = trained_checkpoint("export-bad", ""), out = moe_test::tmp_path("export-bad-out");
  const moe_export_options f32 = options(MOE_EXPORT_F32, MOE_EXPERTS_DEFAULT, MOE_EXPORT_CHECKPOINT);
  auto refused = [&](const std::string& src, const moe_export_options& o, const std::string& needle) {
    moe::fs::remove_all(out);
    char err[1024] = {0};
    CHECK(moe_export_checkpoint(src.c_str(), out.c_str(), "mixtral", &o, err, sizeof err) == MOE_ERROR);
    CHECK_MSG(std::string(err).find(needle) != std::string::npos, "expected '" + needle + "' in: " + err);
    CHECK_MSG(!moe::fs::exists(out), needle + ": something was written");
  };
  // A full run has no adapters; an adapter in bf16 does not exist.
  refused(full, options(MOE_EXPORT_F32, MOE_EXPERTS_DEFAULT, MOE_EXPORT_ADAPTER), "no LoRA adapters");
  refused(full, options(MOE_EXPORT_BF16, MOE_EXPERTS_DEFAULT, MOE_EXPORT_ADAPTER), "f32");
  refused(moe_test::tmp_path("no-such-checkpoint"), f32, "no config.json");
  // Never over a folder that holds anything: not the checkpoint itself, not its export, not any other folder.
  auto folder_files = [](const std::string& dir) {
    std::string all;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      all += e.path().filename().string() + ":" + moe::fs::read_file(e.path().string(), 1ull << 30) + ";";
    return all;
  };
  const std::string hf = moe_test::tmp_path("export-bad-hf");
  moe::fs::remove_all(hf);
  char err[1024] = {0};
  CHECK_MSG(moe_export_checkpoint(full.c_str(), hf.c_str(), "mixtral", &f32, err, sizeof err) == MOE_OK, err);
  moe_test::write_raw(moe::fs::join(hf, "tokenizer.json"), "{}");
  const moe_export_options bf16 = options(MOE_EXPORT_BF16, MOE_EXPERTS_DEFAULT, MOE_EXPORT_CHECKPOINT);
  for (const auto& [src, dst] : {std::pair{full, full}, std::pair{hf, hf}, std::pair{full, hf}}) {
    const std::string before = folder_files(dst);
    CHECK(moe_export_checkpoint(src.c_str(), dst.c_str(), "mixtral", &bf16, err, sizeof err) == MOE_ERROR);
    CHECK_MSG(std::string(err).find("already exists and is not empty") != std::string::npos, err);
    CHECK_MSG(folder_files(dst) == before, dst + ": changed by a refused export");
  }
  // Nor does a checkpoint replace a Hugging Face model folder.
  moe_engine* engine = moe_engine_create(("{" + kModel + R"(, "train": {"seq_len": 8, "batch_size": 1}})").c_str(),
                                         nullptr, err, sizeof err);
  CHECK_MSG(engine != nullptr, err);
  if (engine) {
    const std::string before = folder_files(hf);
    CHECK(moe_engine_save_checkpoint(engine, hf.c_str()) == MOE_ERROR);
    CHECK_MSG(std::string(moe_engine_last_error(engine)).find("is a Hugging Face model folder") != std::string::npos,
              moe_engine_last_error(engine));
    CHECK(folder_files(hf) == before);
    moe_engine_destroy(engine);
  }
  // A flipped byte in the weights: the checksum names the file before anything is parsed.
  const std::string weights = moe::fs::join(full, "model.safetensors");
  std::string bytes = moe::fs::read_file(weights, 1 << 30);
  bytes[bytes.size() - 3] ^= 0x40;
  moe_test::write_raw(weights, bytes);
  refused(full, f32, "model.safetensors");
}

TEST_MAIN()
