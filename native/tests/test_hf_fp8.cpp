// Block-wise FP8 Hugging Face checkpoints (DeepSeek-V3/R1's layout): the e4m3 decoding table against an encoder
// written here, a DeepSeek-V3 checkpoint whose projections are stored as F8_E4M3 with weight_scale_inv (blocks
// of 4 x 5, so partial blocks at both edges) and a multi-token-prediction layer, imported exactly (every value
// fp8 x scale in float32) with the MTP layer skipped and said so; and the refusals, each naming its tensor.
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "model/model.h"
#include "test_files.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/fp8.h"
#include "train/hf_inspect.h"
#include "train/hf_interchange.h"
#include "train/hf_storage.h"
#include "train/safetensors.h"

using namespace moe;
using moe_test::expect_error;
using moe_test::tmp_path;

namespace {

// e4m3fn by its definition: (1 + m/8) · 2^(e-7), subnormal m/8 · 2^-6, S.1111.111 NaN.
double e4m3_definition(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const double sign = code & 0x80 ? -1.0 : 1.0;
  if (e == 0) return sign * (m / 8.0) * std::ldexp(1.0, -6);
  return sign * (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
}

// The code of a value e4m3 holds exactly (fails the test otherwise).
uint8_t e4m3_encode(float v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(v));
  if (a == 0) return sign;
  int ex = 0;
  const double f = std::frexp(a, &ex);  // a = f · 2^ex, f in [0.5, 1)
  int e = ex + 6, m = 0;
  if (e >= 1) {
    const double mant = (2 * f - 1) * 8;
    m = static_cast<int>(mant);
    CHECK(mant == m && e <= 15);
  } else {
    e = 0;
    const double mant = a / std::ldexp(1.0, -9);
    m = static_cast<int>(mant);
    CHECK(mant == m && m < 8);
  }
  return static_cast<uint8_t>(sign | (e << 3) | m);
}

}  // namespace

TEST(e4m3_table) {
  for (int code = 0; code < 256; ++code) {
    const float v = fp8_e4m3_value(static_cast<uint8_t>(code));
    if ((code & 0x7F) == 0x7F) {
      CHECK(std::isnan(v));
      continue;
    }
    CHECK(v == static_cast<float>(e4m3_definition(static_cast<uint8_t>(code))));
    CHECK(e4m3_encode(v) == code);
  }
  CHECK(fp8_e4m3_value(0x38) == 1.0f && fp8_e4m3_value(0x7E) == 448.0f && fp8_e4m3_value(0xFE) == -448.0f);
  CHECK(fp8_e4m3_value(0x01) == std::ldexp(1.0f, -9) && fp8_e4m3_value(0x08) == std::ldexp(1.0f, -6));
}

// The reader takes F8_E4M3 tensors by their one-byte size; reading one as float without its scales is refused.
TEST(safetensors_f8_dtype) {
  const std::vector<uint8_t> bytes{0x38, 0x40, 0xB8, 0x01, 0x7E, 0x00};
  st::Writer w;
  w.add("w", st::DType::F8_E4M3, bytes.data(), {2, 3});
  const std::string path = tmp_path("f8.safetensors");
  w.write(path);
  const st::Reader r(path);
  const st::TensorInfo* t = r.find("w");
  CHECK(t && t->dtype == st::DType::F8_E4M3 && t->shape == (std::vector<int64_t>{2, 3}) && t->end - t->begin == 6);
  CHECK(r.data(*t)[2] == 0xB8 && fp8_e4m3_value(r.data(*t)[2]) == -1.0f);
  std::vector<float> out(6);
  expect_error([&] { r.read_f32("w", out.data(), {2, 3}); }, {"'w'", "F8_E4M3"}, "f8 as float");
}

namespace {

// DeepSeek-V3 with latent attention (q_lora_rank 6), a dense first layer, shared experts and the V3 router.
ModelConfig v3_cfg() {
  ModelConfig m;
  m.family = "mixtral";
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 3;
  m.n_heads = m.n_kv_heads = 4;
  m.max_seq_len = 16;
  m.dense_layers = {0};
  m.d_ff = 20;
  m.expert_d_ff = 8;
  m.shared_expert_d_ff = 16;
  m.n_experts = {4, 4};
  m.top_k = 2;
  m.tie_embeddings = false;
  m.qkv_bias = false;
  m.norm_eps = 1e-6;
  m.aux_loss_coef = 0;
  m.latent = {6, 8, 4, 4, 6, true, true};
  m.router = {RouterScoring::Sigmoid, TopkSelection::NoAuxTc, 2, 1};
  m.selection_bias = true;
  m.routed_scaling = 2.5;
  return m;
}

struct Stored {
  std::map<std::string, std::vector<float>> expected;  // every model tensor's values as imported
  std::map<std::string, std::vector<int64_t>> shapes;
};

bool quantised(const std::string& name, const std::vector<int64_t>& shape) {
  const std::string suffix = "_proj.weight";
  return shape.size() == 2 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Writes `dir` as an FP8 DeepSeek-V3 checkpoint: every *_proj.weight matrix as random e4m3 codes with random
// block factors (blocks br x bc), the rest as the exported F32 values, plus an MTP layer at index 3; `edit`
// changes the tensors or the config before writing.
Stored write_fp8_checkpoint(const std::string& dir, int64_t br, int64_t bc,
                            const std::function<void(std::map<std::string, std::pair<st::DType, std::vector<uint8_t>>>&,
                                                     std::map<std::string, std::vector<int64_t>>&, json::Value&)>& edit = {}) {
  auto be = make_backend("cpu", {2});
  Model model(v3_cfg(), *be);
  const std::string f32 = tmp_path("fp8-source");
  fs::remove_all(f32);
  export_hf(f32, model, "deepseek_v3", st::DType::F32);
  json::Value config = json::parse(fs::read_file(fs::join(f32, "config.json"), 1 << 20), "config.json");
  config.set("num_nextn_predict_layers", json::Value::of(1));
  json::Value q = json::Value::make_object();
  q.set("quant_method", json::Value::of("fp8"));
  q.set("fmt", json::Value::of("e4m3"));
  q.set("activation_scheme", json::Value::of("dynamic"));
  json::Value block = json::Value::make_array();
  block.push(json::Value::of(br));
  block.push(json::Value::of(bc));
  q.set("weight_block_size", block);
  config.set("quantization_config", q);

  Stored out;
  std::map<std::string, std::pair<st::DType, std::vector<uint8_t>>> raw;  // stored bytes by name
  std::map<std::string, std::vector<int64_t>> shapes;
  std::mt19937 rng(5);
  auto put_f32 = [&](const std::string& name, const std::vector<float>& v, const std::vector<int64_t>& shape) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    raw[name] = {st::DType::F32, b};
    shapes[name] = shape;
  };
  // Codes of every finite magnitude up to 448, either sign; factors of any float value.
  auto put_fp8 = [&](const std::string& name, const std::vector<int64_t>& shape, std::vector<float>* expected) {
    const int64_t R = shape[0], C = shape[1], SR = (R + br - 1) / br, SC = (C + bc - 1) / bc;
    std::vector<float> scale(static_cast<size_t>(SR * SC));
    for (float& s : scale) s = std::uniform_real_distribution<float>(1e-3f, 4e-3f)(rng);
    std::vector<uint8_t> codes(static_cast<size_t>(R * C));
    if (expected) expected->resize(codes.size());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const uint8_t pick = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 253)(rng));
        const uint8_t code = pick < 127 ? pick : static_cast<uint8_t>(pick + 1);  // skip 0x7F (NaN); 0xFF unreachable
        const float value = static_cast<float>(e4m3_definition(code));
        codes[static_cast<size_t>(r * C + c)] = e4m3_encode(value);
        if (expected) (*expected)[static_cast<size_t>(r * C + c)] = value * scale[static_cast<size_t>((r / br) * SC + c / bc)];
      }
    raw[name] = {st::DType::F8_E4M3, codes};
    shapes[name] = shape;
    put_f32(fp8_scale_name(name), scale, {SR, SC});
  };
  const st::TensorSet ts(f32);
  for (const auto& [name, e] : ts.entries()) {
    std::vector<float> v(static_cast<size_t>(e.info->numel()));
    e.reader->read_f32(*e.info, v.data(), e.info->shape);
    out.shapes[name] = e.info->shape;
    if (quantised(name, e.info->shape)) {
      put_fp8(name, e.info->shape, &out.expected[name]);
    } else {
      out.expected[name] = v;
      put_f32(name, v, e.info->shape);
    }
  }
  // The MTP layer: a few of DeepSeek-V3's tensors at model.layers.3, FP8 ones with their factors.
  put_f32("model.layers.3.enorm.weight", std::vector<float>(16, 1.0f), {16});
  put_f32("model.layers.3.hnorm.weight", std::vector<float>(16, 1.0f), {16});
  put_fp8("model.layers.3.eh_proj.weight", {16, 32}, nullptr);
  put_fp8("model.layers.3.self_attn.q_a_proj.weight", {6, 16}, nullptr);
  put_f32("model.layers.3.shared_head.norm.weight", std::vector<float>(16, 1.0f), {16});
  if (edit) edit(raw, shapes, config);

  fs::remove_all(dir);
  fs::mkdirs(dir);
  fs::write_file_atomic(fs::join(dir, "config.json"), json::dump(config, 2));
  st::Writer w;
  for (const auto& [name, r] : raw) w.add(name, r.first, r.second.data(), shapes[name]);
  w.write(fs::join(dir, "model.safetensors"));
  return out;
}

}  // namespace

TEST(fp8_deepseek_v3_imports_exactly_and_skips_mtp) {
  const std::string dir = tmp_path("fp8-v3");
  const Stored stored = write_fp8_checkpoint(dir, 4, 5);
  auto be = make_backend("cpu", {2});
  const ModelConfig mc = read_checkpoint_model_config(dir);
  CHECK(mc.n_layers == 3);
  Model model(mc, *be);
  load_weights(dir, model);
  const std::string back = tmp_path("fp8-v3-export");
  fs::remove_all(back);
  export_hf(back, model, "deepseek_v3", st::DType::F32);
  const st::TensorSet out(back);
  CHECK(out.entries().size() == stored.expected.size());
  size_t compared = 0, fp8 = 0;
  for (const auto& [name, want] : stored.expected) {
    const st::TensorSet::Entry* e = out.find(name);
    CHECK_MSG(e != nullptr, name + " missing from the export");
    if (!e) continue;
    std::vector<float> got(want.size());
    e->reader->read_f32(*e->info, got.data(), stored.shapes.at(name));
    CHECK_MSG(std::memcmp(got.data(), want.data(), want.size() * 4) == 0, name + " differs");
    ++compared;
    fp8 += quantised(name, stored.shapes.at(name));
  }
  CHECK(compared == stored.expected.size() && fp8 > 20);
  // The export has no MTP layer and no quantization; its config no MTP count.
  const json::Value hf = json::parse(fs::read_file(fs::join(back, "config.json"), 1 << 20), "config.json");
  CHECK(!hf.find("quantization_config") && !hf.find("num_nextn_predict_layers"));

  // The notes say what the import did beyond reading floats.
  const json::Value config = json::parse(fs::read_file(fs::join(dir, "config.json"), 1 << 20), "config.json");
  const HfStorage storage = hf_storage(config, "config.json", hf_family(HfType::DeepseekV3));
  CHECK(storage.fp8.rows == 4 && storage.fp8.cols == 5 && storage.mtp_first == 3 && storage.mtp_layers == 1);
  CHECK(storage.skipped("model.layers.3.eh_proj.weight") && !storage.skipped("model.layers.2.mlp.gate.weight") &&
        !storage.skipped("model.layers.30.x") && !storage.skipped("model.norm.weight"));
  const std::vector<std::string> notes = hf_storage_notes(storage, st::TensorSet(dir));
  CHECK(notes.size() == 2);
  CHECK(notes[0].find(std::to_string(fp8) + " FP8 (F8_E4M3) weight tensors are dequantised") == 0);
  CHECK(notes[1].find("model.layers.3 (7 tensors) skipped") != std::string::npos);
  CHECK(check_hf_tensors(st::TensorSet(dir), mc, HfType::DeepseekV3, storage).empty());
}

TEST(fp8_refusals_name_the_tensor) {
  auto be = make_backend("cpu", {2});
  auto load = [&](const std::string& dir) {
    Model model(read_checkpoint_model_config(dir), *be);
    load_weights(dir, model);
  };
  const std::string dir = tmp_path("fp8-bad");
  const std::string q = "model.layers.1.self_attn.q_a_proj.weight";
  using Raw = std::map<std::string, std::pair<st::DType, std::vector<uint8_t>>>;
  using Shapes = std::map<std::string, std::vector<int64_t>>;
  write_fp8_checkpoint(dir, 4, 5, [&](Raw& raw, Shapes&, json::Value&) { raw.erase(fp8_scale_name(q)); });
  expect_error([&] { load(dir); }, {"'" + q + "' is F8_E4M3", "'" + fp8_scale_name(q) + "' is missing"}, "no scales");
  write_fp8_checkpoint(dir, 4, 5, [&](Raw& raw, Shapes& shapes, json::Value&) {
    raw[fp8_scale_name(q)].second.resize(4);
    shapes[fp8_scale_name(q)] = {1, 1};
  });
  expect_error([&] { load(dir); }, {"'" + fp8_scale_name(q) + "' has shape [1, 1], expected [2, 4]", "4x5 blocks"},
               "scale shape");
  write_fp8_checkpoint(dir, 4, 5, [&](Raw&, Shapes&, json::Value& c) {
    json::Value qc = *c.find("quantization_config");
    qc.set("weight_block_size", json::Value::null());
    c.set("quantization_config", qc);
  });
  // Without a block size the default is 128 x 128: one factor per matrix here, and the stored [2, 4] is refused.
  expect_error([&] { load(dir); }, {"expected [1, 1]", "128x128 blocks"}, "default block");
  write_fp8_checkpoint(dir, 4, 5, [&](Raw&, Shapes&, json::Value& c) {
    json::Value qc = json::Value::make_object();
    qc.set("quant_method", json::Value::of("awq"));
    c.set("quantization_config", qc);
  });
  expect_error([&] { read_checkpoint_model_config(dir); }, {"'quantization_config'", "\"awq\""}, "awq");
  write_fp8_checkpoint(dir, 4, 5, [&](Raw&, Shapes&, json::Value& c) {
    c.set("quantization_config", json::Value::null());
  });
  expect_error([&] { load(dir); }, {"is F8_E4M3 but config.json has no quantization_config"}, "no quantization");
  // Without num_nextn_predict_layers the MTP layer is a tensor the model has no place for.
  write_fp8_checkpoint(dir, 4, 5, [&](Raw&, Shapes&, json::Value& c) {
    c.set("num_nextn_predict_layers", json::Value::of(0));
  });
  expect_error([&] { load(dir); }, {"unexpected tensor 'model.layers.3."}, "mtp undeclared");
}

// The inspection reads headers only and reports what the import would: the converted config, the dtypes, the
// notes, and every problem naming its file and tensor.
TEST(inspect_reports_without_loading) {
  const std::string dir = tmp_path("fp8-inspect");
  write_fp8_checkpoint(dir, 4, 5);
  json::Value card = inspect_hf_dir(dir);
  CHECK(card.find("supported")->boolean && card.find("model_type")->string == "deepseek_v3");
  CHECK(card.find("label")->string == "DeepSeek-V3" && card.find("problems")->array.empty());
  CHECK(card.find("notes")->array.size() == 2 && card.find("dtypes")->find("F8_E4M3")->number > 20);
  CHECK(card.find("config")->find("n_layers")->number == 3 && card.find("weights")->find("complete")->boolean);
  CHECK(card.find("expert_layout")->string == "per-expert" && card.find("expected_tensors")->number > 30);

  const std::string q = "model.layers.1.self_attn.q_a_proj.weight";
  write_fp8_checkpoint(dir, 4, 5, [&](auto& raw, auto& shapes, json::Value&) {
    raw.erase(fp8_scale_name(q));
    raw["model.norm.weight"].second.resize(4 * 8);
    shapes["model.norm.weight"] = {8};
    raw.erase("lm_head.weight");
  });
  card = inspect_hf_dir(dir);
  CHECK(!card.find("supported")->boolean);
  std::string all;
  for (const json::Value& p : card.find("problems")->array) all += p.string + "\n";
  CHECK_MSG(card.find("problems")->array.size() == 3, all);
  CHECK_MSG(all.find("'" + fp8_scale_name(q) + "' is missing") != std::string::npos, all);
  CHECK_MSG(all.find("model.safetensors: tensor 'model.norm.weight' (for model tensor 'norm_f.weight') has shape [8], expected [16]") != std::string::npos, all);
  CHECK_MSG(all.find("tensor 'lm_head.weight' is missing") != std::string::npos, all);

  // A sharded folder with a shard missing: named, and nothing else is checked.
  fs::write_file_atomic(fs::join(dir, "model.safetensors.index.json"),
                        R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors",
                                           "lm_head.weight": "model-00002-of-00002.safetensors"}})");
  fs::remove_all(fs::join(dir, "model.safetensors"));
  fs::write_file_atomic(fs::join(dir, "model-00001-of-00002.safetensors"), std::string("\0\0\0\0\0\0\0\0", 8));
  card = inspect_hf_dir(dir);
  CHECK(!card.find("weights")->find("complete")->boolean && card.find("problems")->array.size() == 1);
  CHECK(card.find("problems")->array[0].string.find("shard 'model-00002-of-00002.safetensors' (1 tensors) is missing") !=
        std::string::npos);
  expect_error([&] { inspect_hf_dir(tmp_path("nowhere")); }, {"not a folder"}, "absent");
  fs::remove_all(fs::join(dir, "config.json"));
  expect_error([&] { inspect_hf_dir(dir); }, {"no config.json", "not a Hugging Face model folder"}, "no config");
}

TEST(cleanup) { fs::remove_all(moe_test::tmp_dir()); }

TEST_MAIN()
