// ESFT without a chosen set: an engine created so is refused by name (it would otherwise train every expert);
// moe_esft_measure measures on the init weights over the run's data with the config's esft settings and writes
// the chosen set into finetune.experts; moe-engine train does that before training and moe-engine esft prints
// the same measurement.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fsutil.h"
#include "core/json.h"
#include "core/rng.h"
#include "include/moe_engine.h"
#include "test_files.h"
#include "testing.h"
#include "train/token_data.h"

using namespace moe;
using moe_test::tmp_path;
namespace stdfs = std::filesystem;

namespace {

std::string shard(const std::string& name, size_t n) {
  std::vector<uint32_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<uint32_t>(random_u64(11, 5, i) % 64);
  const std::string path = tmp_path(name);
  write_token_file(path, tokens, nullptr, 2, 64);
  return path;
}

const std::string kModel = R"({"arch": "mixtral", "vocab_size": 64, "d_model": 32, "n_layers": 3, "n_heads": 4,
      "n_kv_heads": 2, "max_seq_len": 16, "d_ff": 48, "n_experts": 8, "top_k": 2, "dense_layers": [1]})";
const std::string kTrain = R"({"batch_size": 2, "seq_len": 16, "steps": 2, "threads": 2})";

std::string config(const std::string& finetune, const std::string& extra = "") {
  return R"({"model": )" + kModel + R"(, "train": )" + kTrain + extra + R"(, "finetune": )" + finetune + "}";
}

const std::string kEsft = R"({"method": "esft", "esft": {"threshold": 0.6, "score": "tokens", "sample_batches": 3}})";

std::string tool_path(const char* env, const char* name) {
  if (const char* path = std::getenv(env)) return path;
  return (stdfs::read_symlink("/proc/self/exe").parent_path() / name).string();
}

// The measurement moe_engine_measure_experts gives for the same model, data and settings.
std::string direct_measurement(const std::string& data) {
  const std::string base = R"({"model": )" + kModel + R"(, "train": )" + kTrain + "}";
  char err[1024];
  moe_engine* e = moe_engine_create(base.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  moe_expert_shares_options o{};
  o.struct_size = sizeof o;
  o.token_file = data.c_str();
  o.batches = 3;
  o.threshold = 0.6;
  o.score = MOE_SHARE_TOKENS;
  const char* out = nullptr;
  CHECK(moe_engine_measure_experts(e, &o, &out) == MOE_OK);
  const std::string json = out;
  moe_engine_destroy(e);
  return json;
}

}  // namespace

TEST(an_engine_with_esft_and_no_chosen_experts_is_refused_by_name) {
  char err[1024];
  const std::string c = config(kEsft);
  CHECK(moe_engine_create(c.c_str(), nullptr, err, sizeof err) == nullptr);
  CHECK_MSG(std::string(err).rfind("finetune.experts:", 0) == 0, err);
  // An empty object is no chosen set either.
  const std::string empty = config(R"({"method": "esft", "experts": {}})");
  CHECK(moe_engine_create(empty.c_str(), nullptr, err, sizeof err) == nullptr);
  CHECK_MSG(std::string(err).rfind("finetune.experts:", 0) == 0, err);
  const std::string chosen = config(R"({"method": "esft", "experts": {"0": [1, 2]}})");
  moe_engine* e = moe_engine_create(chosen.c_str(), nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  moe_engine_destroy(e);
}

TEST(moe_esft_measure_writes_the_chosen_set_with_the_configs_settings) {
  const std::string data = shard("esft_run.bin", 2000);
  const json::Value direct = json::parse(direct_measurement(data));
  const std::string c = config(kEsft);
  moe_esft_options o{};
  o.struct_size = sizeof o;
  o.config_json = c.c_str();
  o.token_file = data.c_str();
  o.score = MOE_SHARE_CONFIG;
  const char* out = nullptr;
  const char* shares = nullptr;
  char err[1024];
  CHECK_MSG(moe_esft_measure(&o, &out, &shares, err, sizeof err) == MOE_OK, err);
  CHECK(json::dump(json::parse(shares)) == json::dump(direct));
  const json::Value measured = json::parse(out);
  const json::Value& f = *measured.find("finetune");
  CHECK(json::dump(*f.find("experts")) == json::dump(*direct.find("experts")));
  CHECK(f.find("esft")->find("threshold")->number == 0.6);  // the rest of the section as given
  // Every listed layer chooses fewer than all its experts at p 0.6, so the run really trains a subset.
  for (const auto& [layer, ids] : f.find("experts")->object) CHECK(!ids.array.empty() && ids.array.size() < 8);
  moe_engine* e = moe_engine_create(out, nullptr, err, sizeof err);
  CHECK_MSG(e != nullptr, err);
  moe_engine_destroy(e);

  // A config that names its experts, or is not esft, is left alone.
  const std::string chosen = config(R"({"method": "esft", "experts": {"0": [3]}})");
  o.config_json = chosen.c_str();
  CHECK(moe_esft_measure(&o, &out, &shares, err, sizeof err) == MOE_FINISHED);
  CHECK(std::string(out) == chosen && std::string(shares).empty());
  const std::string plain = R"({"model": )" + kModel + R"(, "train": )" + kTrain + "}";
  o.config_json = plain.c_str();
  CHECK(moe_esft_measure(&o, &out, &shares, err, sizeof err) == MOE_FINISHED);
  // always: measured all the same (moe-engine esft), the config has no section to fill.
  o.always = 1;
  o.batches = 3;
  o.threshold = 0.6;
  o.score = MOE_SHARE_TOKENS;  // no esft section: the settings are given
  CHECK_MSG(moe_esft_measure(&o, &out, &shares, err, sizeof err) == MOE_OK, err);
  CHECK(std::string(out).find("finetune") == std::string::npos);
  CHECK(json::dump(json::parse(shares)) == json::dump(direct));
}

TEST(moe_engine_train_measures_first_and_trains_the_chosen_set) {
  const std::string data = shard("esft_cli.bin", 2000);
  const stdfs::path work = stdfs::path(tmp_path("esft_cli"));
  stdfs::remove_all(work);
  stdfs::create_directories(work);
  const std::string cfg_path = (work / "run.json").string();
  {
    std::FILE* f = std::fopen(cfg_path.c_str(), "w");
    const std::string c = config(kEsft);
    std::fwrite(c.data(), 1, c.size(), f);
    std::fclose(f);
  }
  const std::string cli = tool_path("MOE_CLI", "moe-engine");
  const std::string out = (work / "out").string();
  const std::string cmd = cli + " train --config " + cfg_path + " --data " + data + " --out " + out + " --quiet > " +
                          (work / "train.txt").string() + " 2>&1";
  CHECK_MSG(std::system(cmd.c_str()) == 0, fs::read_file((work / "train.txt").string(), 1 << 20).c_str());
  const json::Value direct = json::parse(direct_measurement(data));
  const json::Value written = json::parse(fs::read_file(out + "/config.json", 1 << 24));
  CHECK(json::dump(*written.find("finetune")->find("experts")) == json::dump(*direct.find("experts")));
  CHECK(json::dump(json::parse(fs::read_file(out + "/expert_shares.json", 1 << 24))) == json::dump(direct));

  // moe-engine esft over the same config (no experts yet) prints the same measurement.
  const std::string printed = (work / "esft.json").string();
  const std::string esft = cli + " esft --config " + cfg_path + " --data " + data + " > " + printed + " 2>&1";
  CHECK(std::system(esft.c_str()) == 0);
  CHECK(json::dump(json::parse(fs::read_file(printed, 1 << 24))) == json::dump(direct));
}

TEST_MAIN()
