// A PEFT adapter's folder on its base model, with no engine: the finetune section is read back from the adapter
// (its LoRA targets and the base modules it saves whole), a generation session on the folder gives the tuned
// model's tokens with its experts resident, in the host tier or in the SSD tier (the base found through the
// adapter's base_model_name_or_path, or given), the adapter merges into a whole Hugging Face export that generates
// the same, in bf16 compute too (the base laid out as it loads, the adapter read after it), and an adapter without
// a usable base, or on another model, is refused by name.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/fsutil.h"
#include "finetune_fixture.h"
#include "generation_session.h"
#include "infer/generator.h"
#include "model/config.h"
#include "model/model.h"
#include "moe_engine.h"
#include "train/hf_interchange.h"
#include "train/lora_adapter.h"
#include "test_files.h"
#include "testing.h"

using namespace moe;

namespace {

struct Case {
  std::string label, model_json, finetune, model_type;
};

std::vector<Case> cases() {
  const auto& f = finetune_test::families();
  // Two shared experts of the routed experts' width, as deepseek_v3 stores them.
  std::string deepseek = f[3].second;
  const std::string shared = R"("shared_expert_d_ff": 16)";
  deepseek.replace(deepseek.find(shared), shared.size(), R"("shared_expert_d_ff": 48)");
  return {{"deepseek", deepseek,
           R"({"method": "lora", "train": ["lm_head"],
               "lora": {"rank": 4, "alpha": 8, "targets": ["attention", "experts", "shared_experts"]}})",
           "deepseek_v3"},
          // The router trains whole beside the adapters: PEFT saves it under modules_to_save.
          {"qwen3", f[5].second,
           R"({"method": "lora", "train": ["router"], "lora": {"rank": 2, "alpha": 3, "rslora": true, "targets": ["experts", "dense_mlp"]}})",
           "qwen3_moe"}};
}

std::vector<int32_t> prompt_tokens(int V) {
  std::vector<int32_t> t(4);
  for (int i = 0; i < 4; ++i) t[i] = static_cast<int32_t>(random_u64(9, 7, i) % V);
  return t;
}

// The model of cfg from seed 5; tuned: its adapters' B and the trained base tensors moved off their start values.
std::unique_ptr<Model> make_model(Backend& be, const EngineConfig& cfg, bool tuned,
                                  ComputeDtype dtype = ComputeDtype::F32) {
  auto m = std::make_unique<Model>(cfg.model, be, dtype, cfg.finetune);
  m->init(5);
  if (!tuned) return m;
  float* p = m->params();
  for (size_t i = 0; i < m->layout().tensors().size(); ++i) {
    const ParamTensor& t = m->layout().tensors()[i];
    const bool lora_b = t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".lora_B") == 0;
    const bool trained_base = !t.adapter && m->trainable().trains(i);
    if (lora_b || trained_base)
      for (size_t j = 0; j < t.numel; ++j) p[t.offset + j] += 1.0f * (random_uniform(17, t.offset, j) - 0.5f);
  }
  return m;
}

// Greedy tokens of a session on dir (base_dir may be empty); empty with the reason in *why when refused.
std::vector<int32_t> folder_tokens(const std::string& dir, const std::string& base_dir, int home,
                                   const std::vector<int32_t>& prompt, size_t n, std::string* why = nullptr,
                                   const std::string& dtype = "fp32") {
  moe_generate_options o{};
  o.struct_size = sizeof o;
  o.expert_home = home;
  o.expert_slots = 2;
  o.cache_experts = 4;
  o.base_dir = base_dir.empty() ? nullptr : base_dir.c_str();
  char err[1024] = {0};
  const std::string config = R"({"train": {"threads": 2, "seed": 77, "compute_dtype": ")" + dtype + R"("}})";
  moe_generation* g = moe_generation_open(dir.c_str(), config.c_str(), &o, err, sizeof err);
  if (!g) {
    if (why) *why = err;
    else CHECK_MSG(false, err);
    return {};
  }
  const std::vector<int32_t> out = moe_test::session_tokens(g, prompt, n);
  moe_generation_destroy(g);
  return out;
}

std::string export_error(const std::string& src, const std::string& out, const std::string& type,
                         const std::string& base_dir, int format = MOE_EXPORT_CHECKPOINT) {
  moe_export_options o{};
  o.struct_size = sizeof o;
  o.dtype = MOE_EXPORT_F32;
  o.format = format;
  o.base_dir = base_dir.empty() ? nullptr : base_dir.c_str();
  char err[1024] = {0};
  return moe_export_checkpoint(src.c_str(), out.c_str(), type.c_str(), &o, err, sizeof err) == MOE_OK ? "" : err;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(an_adapter_folder_on_its_base_generates_the_tuned_models_tokens_and_merges) {
  auto be = make_backend("cpu", {2});
  const int homes[] = {MOE_EXPERTS_RESIDENT, MOE_EXPERTS_HOST, MOE_EXPERTS_SSD};
  for (const Case& c : cases()) {
    const EngineConfig cfg = parse_config_text(finetune_test::config(c.model_json, c.finetune), "test");
    const std::string base = moe_test::tmp_path(c.label + "_base"), adapter = moe_test::tmp_path(c.label + "_adapter"),
                      merged = moe_test::tmp_path(c.label + "_merged");
    for (const std::string& d : {base, adapter, merged}) fs::remove_all(d);
    // The base: the seed's weights, untouched (zero B merges to nothing).
    export_hf(base, *make_model(*be, cfg, false), c.model_type, st::DType::F32);
    auto tuned = make_model(*be, cfg, true);
    export_peft_adapter(adapter, *tuned, cfg.finetune, c.model_type, nullptr, base);

    const FinetuneConfig read = finetune_of_peft_adapter(adapter, cfg.model);
    CHECK_MSG(read.lora.targets.size() == cfg.finetune.lora.targets.size() &&
                  std::is_permutation(read.lora.targets.begin(), read.lora.targets.end(),
                                      cfg.finetune.lora.targets.begin()),
              c.label + ": the adapter's LoRA targets read back");
    CHECK_MSG(read.train == cfg.finetune.train, c.label + ": the base groups it saves read back");
    CHECK_MSG(read.lora.rank == cfg.finetune.lora.rank && read.lora.alpha == cfg.finetune.lora.alpha &&
                  read.lora.rslora == cfg.finetune.lora.rslora,
              c.label + ": rank and scaling read back");

    const std::vector<int32_t> prompt = prompt_tokens(cfg.model.vocab_size);
    GenerateOptions opt;
    opt.max_tokens = 8;
    std::vector<int32_t> expect;
    for (const GeneratedToken& t : Generator(*tuned).generate(prompt, opt)) expect.push_back(t.token);
    std::vector<int32_t> untuned;
    for (const GeneratedToken& t : Generator(*make_model(*be, cfg, false)).generate(prompt, opt))
      untuned.push_back(t.token);
    CHECK_MSG(expect != untuned, c.label + ": the adapter must change the tokens for this test to mean anything");
    for (int home : homes)
      CHECK_MSG(folder_tokens(adapter, "", home, prompt, expect.size()) == expect,
                c.label + ": base from adapter_config.json, home " + std::to_string(home));
    CHECK_MSG(folder_tokens(adapter, base, MOE_EXPERTS_RESIDENT, prompt, expect.size()) == expect,
              c.label + ": base given");
    // In bf16 compute, where the base is laid out as it loads and the adapter's tensors read after it.
    std::vector<int32_t> expect_bf16;
    for (const GeneratedToken& t : Generator(*make_model(*be, cfg, true, ComputeDtype::BF16)).generate(prompt, opt))
      expect_bf16.push_back(t.token);
    for (int home : homes)
      CHECK_MSG(folder_tokens(adapter, "", home, prompt, expect.size(), nullptr, "bf16") == expect_bf16,
                c.label + ": bf16, home " + std::to_string(home));

    // Merged into a whole model (its experts through an SSD-tier file beside the output), which answers alike.
    const std::string err = export_error(adapter, merged, c.model_type, "");
    CHECK_MSG(err.empty(), c.label + ": merged export: " + err);
    CHECK_MSG(!fs::exists(fs::join(merged, "adapter_config.json")) && fs::exists(fs::join(merged, "config.json")),
              c.label + ": the merged export is a whole model");
    CHECK_MSG(folder_tokens(merged, "", MOE_EXPERTS_RESIDENT, prompt, expect.size()) == expect,
              c.label + ": the merged export's tokens");
  }
}

TEST(an_adapter_without_a_usable_base_is_refused_by_name) {
  auto be = make_backend("cpu", {2});
  const std::vector<Case> all = cases();
  std::vector<std::string> bases;
  for (const Case& c : all) {
    const EngineConfig cfg = parse_config_text(finetune_test::config(c.model_json, c.finetune), "test");
    const std::string base = moe_test::tmp_path(c.label + "_refused_base");
    fs::remove_all(base);
    export_hf(base, *make_model(*be, cfg, false), c.model_type, st::DType::F32);
    bases.push_back(base);
  }
  const Case& c = all[0];
  const EngineConfig cfg = parse_config_text(finetune_test::config(c.model_json, c.finetune), "test");
  const std::string lone = moe_test::tmp_path("lone_adapter");
  fs::remove_all(lone);
  export_peft_adapter(lone, *make_model(*be, cfg, true), cfg.finetune, c.model_type);  // names no base
  const std::vector<int32_t> prompt = prompt_tokens(cfg.model.vocab_size);
  std::string why;
  CHECK(folder_tokens(lone, "", MOE_EXPERTS_RESIDENT, prompt, 2, &why).empty());
  CHECK_MSG(has(why, "base_model_name_or_path") && has(why, "adapter_config.json"), why);
  why.clear();
  CHECK(folder_tokens(lone, moe_test::tmp_dir(), MOE_EXPERTS_RESIDENT, prompt, 2, &why).empty());
  CHECK_MSG(has(why, "no config.json"), why);
  why.clear();
  CHECK(folder_tokens(lone, bases[1], MOE_EXPERTS_RESIDENT, prompt, 2, &why).empty());  // another model's base
  CHECK_MSG(has(why, "adapter_model.safetensors"), why);
  // An older client's options end before base_dir: whatever follows them is not read.
  moe_generate_options old{};
  old.struct_size = offsetof(moe_generate_options, base_dir);
  old.base_dir = bases[0].c_str();
  char old_err[1024] = {0};
  CHECK(moe_generation_open(lone.c_str(), nullptr, &old, old_err, sizeof old_err) == nullptr);
  CHECK_MSG(has(old_err, "base_model_name_or_path"), old_err);
  // The merge is refused alike and writes nothing.
  const std::string out = moe_test::tmp_path("lone_merged");
  fs::remove_all(out);
  const std::string err = export_error(lone, out, c.model_type, "");
  CHECK_MSG(has(err, "base_model_name_or_path"), err);
  CHECK(!fs::exists(out));
}

TEST_MAIN()
