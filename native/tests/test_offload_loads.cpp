// Loads into experts whose home is apart from the arenas (the SSD tier; the host tier beside a device) write each
// expert into its home as soon as it is read, instead of reading the whole model into the arenas first. Every
// kind of source lands exactly where a resident load puts it: a Hugging Face folder with per-expert or fused
// expert tensors, in F32 or BF16; our checkpoint's weights under a LoRA run whose adapters it does not hold (they
// keep their values, read back from the home); a PEFT adapter. Checked by training from each start: losses,
// gradient norms, weights and moments bit-identical to the resident run's. Exports go the other way, an expert at
// a time out of the home: their files are byte for byte the resident run's. The SSD tier's start-up writes nothing:
// a load writes each expert's weights once, and a fresh run's initial weights are written before its first step.
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/fsutil.h"
#include "offload_fixture.h"
#include "test_files.h"
#include "testing.h"
#include "train/hf_experts.h"
#include "train/hf_interchange.h"
#include "train/lora_adapter.h"
#include "train/safetensors.h"
#include "train/trainer.h"

using namespace offload_test;

namespace {

const std::string kLora = R"(, "finetune": {"method": "lora", "lora": {"rank": 4, "alpha": 8}})";

// A model trained 3 steps from another seed than the runs', so a load changes every weight.
std::unique_ptr<moe::Trainer> trained_source(const Variant& v, moe::Backend& be) {
  std::string text = config(v);
  const std::string seed = "\"seed\": 11";
  text.replace(text.find(seed), seed.size(), "\"seed\": 29");
  auto t = std::make_unique<moe::Trainer>(moe::parse_config_text(text, "test"), be);
  feed(*t, 3 * v.grad_accum);
  for (int s = 0; s < 3; ++s) t->step();
  return t;
}

void check_same(const Run& off, const Run& resident, const std::string& what) {
  const std::string diff = run_mismatch(off, resident);
  CHECK_MSG(diff.empty(), what + ": " + diff);
}

// v started from `init` resident, and with its experts on the host tier apart from the arenas and on the SSD tier.
void check_starts_alike(Variant v, const std::string& init, const std::string& what) {
  v.init = init;
  const Run resident = train(v, 4);
  Variant apart = v, ssd = v;
  apart.offload = host_offload(0.25, 2);
  apart.device_apart = true;
  ssd.offload = ssd_offload(0.25, 2);
  check_same(train(apart, 4), resident, what + ", host tier apart");
  check_same(train(ssd, 4), resident, what + ", SSD tier");
}

}  // namespace

TEST(starts_from_hugging_face_folders_match_resident) {
  auto be = backend_for(Variant{});
  auto source = trained_source(Variant{}, *be);
  const moe::HfExpertLayout per = moe::HfExpertLayout::PerExpert, fused = moe::HfExpertLayout::Fused;
  struct Folder {
    const char* what;
    moe::st::DType dtype;
    const moe::HfExpertLayout* layout;
  };
  for (const Folder& f : {Folder{"per-expert F32", moe::st::DType::F32, &per},
                          Folder{"fused F32", moe::st::DType::F32, &fused},
                          Folder{"fused BF16", moe::st::DType::BF16, &fused}}) {
    const std::string dir = moe_test::tmp_path(std::string("loads-hf-") + f.what);
    moe::fs::remove_all(dir);
    moe::export_hf(dir, source->model(), "mixtral", f.dtype, f.layout);
    check_starts_alike(Variant{}, dir, f.what);
    Variant lora;
    lora.sections = kLora;
    check_starts_alike(lora, dir, std::string(f.what) + " under LoRA");  // the adapters are not in the folder
    moe::fs::remove_all(dir);
  }
}

TEST(starts_from_our_base_checkpoint_and_a_peft_adapter_match_resident) {
  auto be = backend_for(Variant{});
  const std::string base = moe_test::tmp_path("loads-base"), peft = moe_test::tmp_path("loads-peft");
  moe::fs::remove_all(base);
  moe::fs::remove_all(peft);
  trained_source(Variant{}, *be)->save_checkpoint(base);
  Variant lora;
  lora.sections = kLora;
  // Our full checkpoint without adapters: a LoRA run takes its base weights and keeps its own adapters.
  check_starts_alike(lora, base, "base checkpoint under LoRA");
  auto tuned = trained_source(lora, *be);
  moe::export_peft_adapter(peft, tuned->model(), tuned->config().finetune, "mixtral");
  check_starts_alike(lora, peft, "PEFT adapter");
  moe::fs::remove_all(base);
  moe::fs::remove_all(peft);
}

// The bytes of every file of an export folder, by name.
std::string folder_bytes(const std::string& dir) {
  std::string all;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    all += e.path().filename().string() + ":" + moe::fs::read_file(e.path().string(), 1ull << 30) + ";";
  return all;
}

TEST(exports_from_an_offloaded_home_match_resident) {
  for (const bool lora : {false, true}) {
    Variant v;
    if (lora) v.sections = kLora;
    Variant apart = v, ssd = v;
    apart.offload = host_offload(0.25, 2);
    apart.device_apart = true;
    ssd.offload = ssd_offload(0.25, 2);
    std::vector<std::string> exports[3];
    int k = 0;
    for (const Variant& o : {v, apart, ssd}) {
      auto be = backend_for(o);
      auto t = trained_source(o, *be);
      const moe::HfExpertLayout fused = moe::HfExpertLayout::Fused;
      const std::string a = moe_test::tmp_path("loads-export-a"), b = moe_test::tmp_path("loads-export-b"),
                        c = moe_test::tmp_path("loads-export-c");
      for (const std::string& d : {a, b, c}) moe::fs::remove_all(d);
      t->settle();
      moe::export_hf(a, t->model(), "mixtral", moe::st::DType::F32, nullptr, t->expert_home());
      moe::export_hf(b, t->model(), "mixtral", moe::st::DType::BF16, &fused, t->expert_home());
      exports[k] = {folder_bytes(a), folder_bytes(b)};
      if (lora) {
        moe::export_peft_adapter(c, t->model(), t->config().finetune, "mixtral", t->expert_home());
        exports[k].push_back(folder_bytes(c));
      }
      for (const std::string& d : {a, b, c}) moe::fs::remove_all(d);
      ++k;
    }
    for (size_t f = 0; f < exports[0].size(); ++f) {
      const std::string what = std::string(lora ? "LoRA " : "") + "export " + std::to_string(f);
      CHECK_MSG(exports[1][f] == exports[0][f], what + ": host tier apart differs from resident");
      CHECK_MSG(exports[2][f] == exports[0][f], what + ": SSD tier differs from resident");
    }
  }
}

// The bytes the SSD tier's expert file holds on disk (its holes read as zeros and take none).
int64_t disk_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_blocks) * 512 : -1;
}

// The SSD tier's deferred start-up: a fresh file of zeros is every gradient and moment, so nothing is written until
// a load writes each expert's weights (once; a start from a checkpoint never writes initial weights it then
// overwrites), or until the first step writes a fresh run's initial weights; either run trains as resident does.
TEST(ssd_start_up_writes_nothing_a_load_then_writes_the_weights_once) {
  auto be = backend_for(Variant{});
  const std::string base = moe_test::tmp_path("loads-deferred");
  moe::fs::remove_all(base);
  trained_source(Variant{}, *be)->save_checkpoint(base);
  for (const bool load : {false, true}) {
    const std::string dir = moe_test::tmp_path(load ? "deferred-ssd-load" : "deferred-ssd-fresh");
    moe::fs::remove_all(dir);
    Variant v;
    v.offload = ssd_offload(0.25, 2, R"(, "ssd_dir": ")" + dir + "\"");
    moe::Trainer t(moe::parse_config_text(config(v), "test"), *be);
    const std::string file = moe::fs::join(dir, "experts.bin");
    size_t weights = 0;
    for (const moe::ExpertRange& r : t.model().layout().expert_ranges()) weights += (r.end - r.begin) * sizeof(float);
    const int64_t fresh = disk_bytes(file);
    CHECK_MSG(fresh >= 0 && fresh < 64 * 1024, "start-up wrote " + std::to_string(fresh) + " bytes");
    if (load) {
      t.init_from(base);
      // The weights part of each record (4 KiB aligned), not the gradient and moments: under a third of the file.
      const int64_t loaded = disk_bytes(file), size = static_cast<int64_t>(std::filesystem::file_size(file));
      CHECK_MSG(loaded >= static_cast<int64_t>(weights) && loaded < size / 3,
                "a load wrote " + std::to_string(loaded) + " bytes for " + std::to_string(weights) +
                    " of weights, in a file of " + std::to_string(size));
    }
    feed(t, v.grad_accum);
    t.step();
    CHECK_MSG(disk_bytes(file) > static_cast<int64_t>(weights), "a step writes the gradient and moments it trains");
  }
  Variant fresh;
  fresh.offload = ssd_offload(0.25, 2);
  check_same(train(fresh, 3), train(Variant{}, 3), "a fresh SSD run");
  check_starts_alike(Variant{}, base, "our checkpoint");
  moe::fs::remove_all(base);
}

TEST_MAIN()
