// Generation with a KV cache: for a tiny variant of every family preset (and the attention options the presets
// leave off), prefill and one-token decode reproduce the full forward's logits at every position; greedy
// generation with the routed experts kept in the host or SSD tier (a cache of device slots) gives the resident
// tokens and experts; a LoRA fine-tune generates with its adapters (attention and experts, also from the slots);
// sampling replays for a seed; stop tokens and limits end a generation.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "backend/registry.h"
#include "finetune_fixture.h"
#include "generation_session.h"
#include "infer/expert_slots.h"
#include "infer/generator.h"
#include "model/config.h"
#include "model/model.h"
#include "moe_engine.h"
#include "train/checkpoint.h"
#include "test_files.h"
#include "testing.h"

using namespace moe;

namespace {

std::string source_dir() {
  const char* src = std::getenv("MOE_SOURCE_DIR");
  return src ? src : "..";
}

ModelConfig preset(const std::string& name) {
  const std::string path = source_dir() + "/resources/presets/" + name + ".json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK_MSG(!text.str().empty(), "cannot read " + path);
  return parse_config_text(text.str(), path).model;
}

// The preset's features on a model small enough to test: every option it sets stays set, at tiny sizes (YaRN
// with an original context shorter than the test's, so its scaled frequencies matter; windows shorter than it).
ModelConfig shrink(ModelConfig m) {
  const bool gqa = m.n_kv_heads < m.n_heads;
  m.vocab_size = 64;
  m.d_model = 32;
  m.n_layers = 4;
  m.n_heads = 4;
  m.n_kv_heads = gqa ? 2 : 4;
  if (m.head_dim > 0) m.head_dim = 12;
  m.max_seq_len = 16;
  m.d_ff = 24;
  m.expert_d_ff = 16;
  if (m.shared_expert_d_ff > 0) m.shared_expert_d_ff = 20;
  m.top_k = std::min(m.top_k, 3);
  std::erase_if(m.dense_layers, [&](int l) { return l >= m.n_layers; });
  int moe = 0;
  for (int l = 0; l < m.n_layers; ++l) moe += m.is_moe_layer(l);
  m.n_experts.assign(moe, 8);
  if (m.latent.enabled()) {
    m.latent.kv_lora_rank = 10;
    m.latent.qk_nope_head_dim = 6;
    m.latent.qk_rope_head_dim = 4;
    m.latent.v_head_dim = 8;
    if (m.latent.q_lora_rank > 0) m.latent.q_lora_rank = 12;
  }
  if (m.rope_scaling.type != RopeScalingType::None) {
    m.rope_scaling.original_max_position_embeddings = 4;
    m.rope_scaling.factor = 4;
  }
  if (m.sliding_window > 0) {
    m.sliding_window = 3;
    m.sliding_layers = {0, 2};
  }
  m.init_std = 0.1;
  return parse_model_config(model_config_to_json(m));
}

struct Case {
  std::string label;
  ModelConfig cfg;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/resources/presets")) {
    const std::string name = entry.path().stem().string();
    out.push_back({name, shrink(preset(name))});
  }
  std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) { return a.label < b.label; });
  // Options no preset sets at these sizes.
  ModelConfig clip = shrink(preset("olmoe-1b-7b"));
  clip.clip_qkv = 0.3;
  out.push_back({"olmoe + clip_qkv", parse_model_config(model_config_to_json(clip))});
  ModelConfig qlora = shrink(preset("deepseek-v2-lite"));
  qlora.latent.q_lora_rank = 12;
  qlora.latent.softmax_mscale = true;
  qlora.rope_scaling.mscale_all_dim = 0.6;
  qlora.selection_bias = true;
  out.push_back({"deepseek + q_lora + mscale", parse_model_config(model_config_to_json(qlora))});
  // Long enough that the cache grows (its first 64 rows are copied into a larger block) mid-generation.
  ModelConfig longer = shrink(preset("gpt-oss-20b"));
  longer.max_seq_len = 80;
  out.push_back({"gpt-oss, 80 positions", parse_model_config(model_config_to_json(longer))});
  return out;
}

// A LoRA fine-tune's model drawn from seed 5, its adapters given non-zero B so that they change the logits.
std::unique_ptr<Model> lora_model(const EngineConfig& cfg, Backend& be, ComputeDtype dtype) {
  auto m = std::make_unique<Model>(cfg.model, be, dtype, cfg.finetune);
  m->init(5);
  float* p = m->params();
  for (const ParamTensor& t : m->layout().tensors())
    if (t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".lora_B") == 0)
      for (size_t i = 0; i < t.numel; ++i) p[t.offset + i] = 0.2f * (random_uniform(17, t.offset, i) - 0.5f);
  return m;
}

std::vector<int32_t> random_tokens(int n, int V, uint64_t seed) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>(random_u64(seed, 7, i) % V);
  return t;
}

// Tolerance on |decode − forward| per logit, relative to max(1, |forward|): the two compute the same
// expressions, but the attention's dot products and softmax sums run in another order (fp32 rounding).
constexpr double kLogitTolerance = 1e-5;

}  // namespace

TEST(decode_logits_match_full_forward_for_every_preset) {
  auto be = make_backend("cpu", {2});
  for (const Case& c : cases()) {
    Model model(c.cfg, *be);
    model.init(5);
    const int T = c.cfg.max_seq_len, V = c.cfg.vocab_size, prefill = 5;
    const std::vector<int32_t> tokens = random_tokens(T, V, 3);
    model.forward(tokens.data(), nullptr, 1, T);
    const std::vector<float> full(model.logits(), model.logits() + (size_t)T * V);

    Generator gen(model);
    std::vector<float> rows;
    gen.feed(tokens.data(), prefill, &rows);
    double worst = 0;
    auto compare = [&](const float* got, int t) {
      for (int v = 0; v < V; ++v) {
        const double ref = full[(size_t)t * V + v];
        worst = std::max(worst, std::fabs(got[v] - ref) / std::max(1.0, std::fabs(ref)));
      }
    };
    for (int t = 0; t < prefill; ++t) compare(rows.data() + (size_t)t * V, t);
    for (int t = prefill; t < T; ++t) {
      gen.feed(&tokens[t], 1);
      compare(gen.logits().data(), t);
    }
    std::printf("  %-28s decode vs forward: worst relative logit error %.3g\n", c.label.c_str(), worst);
    CHECK_MSG(worst <= kLogitTolerance, c.label + ": decode logits differ from the forward's by " + std::to_string(worst));
    CHECK(gen.position() == T);
  }
}

// bf16 compute: generation works on the bf16 copies of the weights as the forward does (every linear, the attention's
// projections and the head included), brought up to date by the generator itself (a model loaded or stepped but
// never run forward has stale copies).
TEST(bf16_decode_matches_the_bf16_forward_on_a_fresh_model) {
  auto be = make_backend("cpu", {2});
  for (const Case& c : cases()) {
    if (c.label != "olmoe-1b-7b" && c.label != "deepseek-v2-lite") continue;
    Model reference(c.cfg, *be, ComputeDtype::BF16), fresh(c.cfg, *be, ComputeDtype::BF16);
    reference.init(5);
    fresh.init(5);
    const int T = c.cfg.max_seq_len, V = c.cfg.vocab_size;
    const std::vector<int32_t> tokens = random_tokens(T, V, 3);
    reference.forward(tokens.data(), nullptr, 1, T);
    Generator gen(fresh);  // no forward has run on it
    std::vector<float> rows;
    gen.feed(tokens.data(), T, &rows);
    double worst = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      worst = std::max(worst, std::fabs((double)rows[i] - reference.logits()[i]) /
                                  std::max(1.0, std::fabs((double)reference.logits()[i])));
    std::printf("  %-28s bf16 decode vs bf16 forward: worst relative logit error %.3g\n", c.label.c_str(), worst);
    // The same kernels on the same bf16 copies as the forward (0 measured; 0.2-0.9 on the stale copies this guards
    // against, and 0.008 while the attention's projections and the head still ran on the fp32 weights).
    CHECK_MSG(worst <= kLogitTolerance, c.label + ": bf16 prefill differs from the bf16 forward by " + std::to_string(worst));
  }
}

// A model that only answers (a session's own) lays its linear weights out once and hands their fp32 and bf16 copies
// back: its logits are still the bf16 model's, bit for bit, for every family (latent attention reads kv_a whole
// for it), and writing its weights afterwards is refused, never computed on zeros.
TEST(an_answering_bf16_model_gives_the_bf16_logits_and_keeps_no_weight_copies) {
  auto be = make_backend("cpu", {2});
  for (const Case& c : cases()) {
    Model reference(c.cfg, *be, ComputeDtype::BF16), answering(c.cfg, *be, ComputeDtype::BF16);
    reference.init(5);
    answering.init(5);
    answering.set_inference_only();
    const int V = c.cfg.vocab_size;
    const std::vector<int32_t> prompt = random_tokens(std::min(6, c.cfg.max_seq_len - 4), V, 3);
    Generator want(reference), got(answering);
    std::vector<float> want_rows, got_rows;
    want.feed(prompt.data(), (int)prompt.size(), &want_rows);
    got.feed(prompt.data(), (int)prompt.size(), &got_rows);
    bool same = want_rows == got_rows;
    for (int s = 0; s < 3 && same; ++s) {
      same = want.step({}, s).token == got.step({}, s).token && want.logits() == got.logits();
    }
    CHECK_MSG(same, c.label + ": the answering model's logits differ from the bf16 model's");
    CHECK_MSG(be->kept_bf16_bytes() > 0, c.label + ": nothing laid out");
    // Handed back: the head's fp32 weight (unless it is the embedding table) and its bf16 copy read as zeros.
    const ModelParams& p = answering.param_ptrs();
    if (p.lm_head != p.wte) CHECK_MSG(p.lm_head[0] == 0.0f && p.lm_head[V - 1] == 0.0f, c.label + ": fp32 head kept");
    CHECK_MSG(p.lm_head_bf16[0] == 0 && reference.param_ptrs().lm_head_bf16[0] != 0, c.label + ": bf16 head copy kept");
    answering.params()[0] += 1.0f;
    std::string error;
    try {
      got.feed(prompt.data(), 1);
    } catch (const std::exception& e) {
      error = e.what();
    }
    CHECK_MSG(error.find("cannot be written") != std::string::npos, c.label + ": a write was not refused: " + error);
  }
  // A LoRA fine-tune answering in bf16: the base laid out, the adapters (fp32) kept.
  for (const auto& [family, model_json] : finetune_test::families()) {
    const EngineConfig cfg = parse_config_text(
        finetune_test::config(model_json, R"({"method": "lora", "lora": {"rank": 4, "alpha": 8, "targets": ["attention", "experts"]}})"),
        "test");
    auto reference = lora_model(cfg, *be, ComputeDtype::BF16), answering = lora_model(cfg, *be, ComputeDtype::BF16);
    answering->set_inference_only();
    const std::vector<int32_t> prompt = random_tokens(5, cfg.model.vocab_size, 3);
    std::vector<float> want, got;
    Generator(*reference).feed(prompt.data(), (int)prompt.size(), &want);
    Generator(*answering).feed(prompt.data(), (int)prompt.size(), &got);
    CHECK_MSG(want == got, family + " LoRA: the answering model's logits differ from the bf16 model's");
  }
}

// In bf16 compute the slots hand out bf16 copies of their experts' linear weights, so offloaded experts compute as
// resident ones do: the same logits, bit for bit.
TEST(offloaded_experts_in_bf16_compute_give_the_resident_logits) {
  auto be = make_backend("cpu", {2});
  for (const Case& c : cases()) {
    const std::vector<int32_t> prompt = random_tokens(4, c.cfg.vocab_size, 9);
    auto logits = [&](Model& model, ExpertAccess* slots) {
      Generator gen(model, slots);
      std::vector<float> rows;
      gen.feed(prompt.data(), (int)prompt.size(), &rows);
      for (int s = 0; s < 4; ++s) {
        gen.step({}, s);
        rows.insert(rows.end(), gen.logits().begin(), gen.logits().end());
      }
      return rows;
    };
    Model resident(c.cfg, *be, ComputeDtype::BF16);
    resident.init(5);
    const std::vector<float> want = logits(resident, nullptr);
    for (ExpertHome home : {ExpertHome::Host, ExpertHome::Ssd}) {
      Model model(c.cfg, *be, ComputeDtype::BF16);
      model.init(5);
      OffloadConfig ssd;
      ssd.cache_experts = 4;
      ExpertSlotCache slots(*be, model.layout(), model.param_ptrs(), model.params(), home, 3, ssd);
      if (home == ExpertHome::Ssd) slots.release_arena_experts();
      model.set_expert_access(&slots);
      CHECK_MSG(logits(model, &slots) == want, c.label + (home == ExpertHome::Host ? " (host tier)" : " (SSD tier)"));
    }
  }
}

TEST(offloaded_experts_generate_the_resident_tokens) {
  auto be = make_backend("cpu", {2});
  for (const Case& c : cases()) {
    GenerateOptions opt;
    opt.max_tokens = 10;
    const std::vector<int32_t> prompt = random_tokens(4, c.cfg.vocab_size, 9);
    Model resident_model(c.cfg, *be);
    resident_model.init(5);
    const auto resident = Generator(resident_model).generate(prompt, opt);
    CHECK(resident.size() == 10);
    for (ExpertHome home : {ExpertHome::Host, ExpertHome::Ssd}) {
      Model model(c.cfg, *be);
      model.init(5);
      OffloadConfig ssd;
      ssd.cache_experts = 4;
      ExpertSlotCache slots(*be, model.layout(), model.param_ptrs(), model.params(), home, 3, ssd);
      // Nothing but the SSD records can serve an expert now.
      if (home == ExpertHome::Ssd) slots.release_arena_experts();
      const auto got = Generator(model, &slots).generate(prompt, opt);
      const std::string label = c.label + (home == ExpertHome::Host ? " (host tier)" : " (SSD tier)");
      CHECK_MSG(got.size() == resident.size(), label + ": token count");
      for (size_t i = 0; i < std::min(got.size(), resident.size()); ++i) {
        CHECK_MSG(got[i].token == resident[i].token, label + ": token " + std::to_string(i));
        CHECK_MSG(got[i].experts == resident[i].experts, label + ": experts of token " + std::to_string(i));
      }
      const ExpertSlotStats s = slots.take_stats();
      CHECK_MSG(s.misses > 0 && s.bytes_uploaded > 0, label + ": experts were copied into slots");
      if (home == ExpertHome::Ssd) CHECK_MSG(s.store.bytes_read > 0, label + ": experts were read from the SSD");
    }
  }
}

// A LoRA fine-tune of every family shape, its adapters given non-zero B so they change the logits: decode matches
// the training forward (adapters on every attention projection, latent attention's too, and in the experts), and
// the SSD tier's slots carry each expert's adapters along with its weights.
TEST(lora_fine_tunes_generate_with_their_adapters) {
  auto be = make_backend("cpu", {2});
  for (const auto& [family, model_json] : finetune_test::families()) {
    const std::string targets = R"(["attention", "experts", "shared_experts", "dense_mlp"])";
    const EngineConfig cfg = parse_config_text(
        finetune_test::config(model_json, R"({"method": "lora", "lora": {"rank": 4, "alpha": 8, "targets": )" + targets + "}}"),
        "test");
    auto make = [&] { return lora_model(cfg, *be, ComputeDtype::F32); };
    auto base_model = std::make_unique<Model>(cfg.model, *be);
    base_model->init(5);
    auto model = make();
    const int T = cfg.model.max_seq_len, V = cfg.model.vocab_size;
    const std::vector<int32_t> tokens = random_tokens(T, V, 3);
    base_model->forward(tokens.data(), nullptr, 1, T);
    const std::vector<float> base(base_model->logits(), base_model->logits() + (size_t)T * V);
    model->forward(tokens.data(), nullptr, 1, T);
    const std::vector<float> full(model->logits(), model->logits() + (size_t)T * V);
    CHECK_MSG(full != base, family + ": the adapters must change the logits for this test to mean anything");
    Generator gen(*model);
    gen.feed(tokens.data(), 1);
    double worst = 0;
    for (int t = 1; t < T; ++t) {
      gen.feed(&tokens[t], 1);
      for (int v = 0; v < V; ++v) {
        const double ref = full[(size_t)t * V + v];
        worst = std::max(worst, std::fabs(gen.logits()[v] - ref) / std::max(1.0, std::fabs(ref)));
      }
    }
    CHECK_MSG(worst <= kLogitTolerance, family + ": LoRA decode differs from the forward by " + std::to_string(worst));

    GenerateOptions opt;
    opt.max_tokens = 8;
    const std::vector<int32_t> prompt = random_tokens(4, V, 9);
    const auto resident = Generator(*model).generate(prompt, opt);
    auto offloaded = make();
    OffloadConfig ssd;
    ssd.cache_experts = 4;
    ExpertSlotCache slots(*be, offloaded->layout(), offloaded->param_ptrs(), offloaded->params(), ExpertHome::Ssd, 2, ssd);
    slots.release_arena_experts();
    const auto got = Generator(*offloaded, &slots).generate(prompt, opt);
    CHECK_MSG(got.size() == resident.size(), family + ": token count with experts in the SSD tier");
    for (size_t i = 0; i < std::min(got.size(), resident.size()); ++i)
      CHECK_MSG(got[i].token == resident[i].token, family + ": SSD-tier token " + std::to_string(i));
  }
}

TEST(generated_tokens_record_each_moe_layers_experts) {
  auto be = make_backend("cpu", {2});
  const ModelConfig cfg = shrink(preset("qwen3-30b-a3b"));
  Model model(cfg, *be);
  model.init(5);
  GenerateOptions opt;
  opt.max_tokens = 6;
  const auto out = Generator(model).generate(random_tokens(3, cfg.vocab_size, 1), opt);
  for (const GeneratedToken& g : out) {
    CHECK(static_cast<int>(g.experts.size()) == cfg.n_moe_layers());
    for (const auto& layer : g.experts) {
      CHECK(static_cast<int>(layer.size()) == cfg.top_k);
      std::vector<int32_t> sorted = layer;
      std::sort(sorted.begin(), sorted.end());
      CHECK_MSG(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "distinct experts per layer");
      for (int32_t e : layer) CHECK(e >= 0 && e < 8);
    }
  }
}

TEST(sampling_replays_for_a_seed_and_stops) {
  auto be = make_backend("cpu", {2});
  const ModelConfig cfg = shrink(preset("olmoe-1b-7b"));
  Model model(cfg, *be);
  model.init(5);
  Generator gen(model);
  const std::vector<int32_t> prompt = random_tokens(3, cfg.vocab_size, 2);
  auto tokens = [&](const GenerateOptions& o) {
    std::vector<int32_t> t;
    for (const auto& g : gen.generate(prompt, o)) t.push_back(g.token);
    return t;
  };
  GenerateOptions o;
  o.max_tokens = 12;
  o.sampling = {1.5, 0, 1.0, 42};
  const auto a = tokens(o), b = tokens(o);
  CHECK(a == b);
  o.sampling.seed = 43;
  CHECK_MSG(tokens(o) != a, "another seed draws other tokens");
  // top_k 1 and a tiny top_p are greedy.
  GenerateOptions greedy;
  greedy.max_tokens = 12;
  const auto g = tokens(greedy);
  o.sampling = {1.0, 1, 1.0, 7};
  CHECK(tokens(o) == g);
  o.sampling = {1.0, 0, 1e-6, 7};
  CHECK(tokens(o) == g);
  // Ends after the first stop token, which is emitted.
  greedy.stop_tokens = {g[2]};
  const auto stopped = gen.generate(prompt, greedy);
  const size_t first = std::find(g.begin(), g.end(), g[2]) - g.begin();
  CHECK(stopped.size() == first + 1);
  CHECK(stopped.back().stop == StopReason::StopToken);
  // The model's last position ends it too: 3 prompt tokens and 13 fed-back ones fill max_seq_len 16, and the
  // 14th token is sampled from the last.
  greedy.stop_tokens.clear();
  greedy.max_tokens = 100;
  const auto full = gen.generate(prompt, greedy);
  CHECK(full.size() == 14);
  CHECK(full.back().stop == StopReason::Length);
  moe_test::expect_error([&] { o.sampling.top_p = 0; gen.generate(prompt, o); }, {"sampling.top_p"}, "top_p 0");
}

namespace {

// An engine of cfg (seed 5) through the C API, with an "offload" section when given; null (failing) when refused.
moe_engine* c_api_engine(const ModelConfig& cfg, const char* offload = nullptr) {
  json::Value root = json::parse("{}", "test");
  root.set("model", model_config_to_json(cfg));
  root.set("train", json::parse(R"({"seed": 5, "threads": 2, "seq_len": 16})", "test"));
  if (offload) root.set("offload", json::parse(offload, "test"));
  char err[512] = {0};
  moe_engine* engine = moe_engine_create(json::dump(root).c_str(), nullptr, err, sizeof err);
  CHECK_MSG(engine != nullptr, err);
  return engine;
}

// The greedy tokens of cfg's model initialised from seed 5.
std::vector<GeneratedToken> greedy_tokens(const ModelConfig& cfg, const std::vector<int32_t>& prompt) {
  auto be = make_backend("cpu", {2});
  Model model(cfg, *be);
  model.init(5);
  GenerateOptions opt;
  opt.max_tokens = 8;
  return Generator(model).generate(prompt, opt);
}

// A session with 2 expert slots at `home`, fed the prompt; null (failing) when refused.
moe_generation* fed_session(moe_engine* engine, int home, const std::vector<int32_t>& prompt) {
  moe_generate_options o{};
  o.struct_size = sizeof o;
  o.expert_home = home;
  o.expert_slots = 2;
  moe_generation* g = moe_generation_create(engine, &o);
  CHECK_MSG(g != nullptr, moe_engine_last_error(engine));
  if (g) CHECK(moe_generation_feed(g, prompt.data(), (int32_t)prompt.size()) == MOE_OK);
  return g;
}

}  // namespace

// The C API's session: the Generator's greedy tokens and experts, resident and from the SSD tier; an older
// client's shorter token struct is filled only as far as it reaches; bad options name the field.
TEST(c_api_generation_session_matches_the_generator) {
  const ModelConfig cfg = shrink(preset("deepseek-v2-lite"));
  // An engine whose experts live in its offload's SSD tier (its arenas hold none) streams them from that home
  // through the slots, whatever expert_home asks.
  const char* ssd = R"({"mode": "ssd", "expert_slots": 4, "cache_experts": 4})";
  for (const char* offload : {static_cast<const char*>(nullptr), ssd}) {
    moe_engine* engine = c_api_engine(cfg, offload);
    if (!engine) return;
    const std::vector<int32_t> prompt = random_tokens(4, cfg.vocab_size, 9);
    const auto expect = greedy_tokens(cfg, prompt);
    for (int home : {MOE_EXPERTS_RESIDENT, MOE_EXPERTS_SSD}) {
      moe_generation* g = fed_session(engine, home, prompt);
      if (!g) continue;
      for (size_t i = 0; i < expect.size(); ++i) {
        moe_generated_token t{};
        t.struct_size = sizeof t;
        CHECK(moe_generation_step(g, &t) == MOE_OK);
        CHECK_MSG(t.token == expect[i].token, "token " + std::to_string(i));
        CHECK(t.position == (int32_t)(prompt.size() + i - 1));
        CHECK(t.moe_layers == cfg.n_moe_layers() && t.top_k == cfg.top_k);
        for (int m = 0; m < t.moe_layers; ++m)
          for (int k = 0; k < t.top_k; ++k) CHECK(t.experts[m * t.top_k + k] == expect[i].experts[m][k]);
        CHECK(t.layers[0] == 1);  // deepseek's layer 0 is dense
      }
      int64_t misses = -1;
      moe_generation_expert_stats(g, &misses, nullptr, nullptr);
      CHECK(home == MOE_EXPERTS_RESIDENT && !offload ? misses == 0 : misses > 0);
      CHECK(moe_generation_reset(g) == MOE_OK && moe_generation_position(g) == 0);
      moe_generated_token t{};
      t.struct_size = sizeof t;
      CHECK(moe_generation_step(g, &t) == MOE_ERROR);  // nothing fed
      CHECK(std::string(moe_generation_last_error(g)).find("feed a prompt") != std::string::npos);
      // An older client's struct: token only.
      CHECK(moe_generation_feed(g, prompt.data(), (int32_t)prompt.size()) == MOE_OK);
      struct {
        moe_generated_token t;
        int32_t guard;
      } old{};
      old.t.struct_size = offsetof(moe_generated_token, position);
      old.t.position = -7;
      CHECK(moe_generation_step(g, &old.t) == MOE_OK);
      CHECK(old.t.token == expect[0].token && old.t.position == -7);
      moe_generation_destroy(g);
    }
    moe_generate_options bad{};
    bad.struct_size = sizeof bad;
    bad.top_p = 2;
    CHECK(moe_generation_create(engine, &bad) == nullptr);
    CHECK(std::string(moe_engine_last_error(engine)).find("sampling.top_p") != std::string::npos);
    moe_engine_destroy(engine);
  }
}

namespace {

// The greedy tokens of a session opened on dir with 2 expert slots at `home`; empty (failing) when refused.
std::vector<int32_t> folder_tokens(const std::string& dir, int home, const std::vector<int32_t>& prompt, size_t n,
                                   const char* config = R"({"train": {"threads": 2, "seed": 77}})") {
  moe_generate_options o{};
  o.struct_size = sizeof o;
  o.expert_home = home;
  o.expert_slots = 2;
  o.cache_experts = 4;
  char err[512] = {0};
  moe_generation* g = moe_generation_open(dir.c_str(), config, &o, err, sizeof err);
  CHECK_MSG(g != nullptr, err);
  if (!g) return {};
  const std::vector<int32_t> out = moe_test::session_tokens(g, prompt, n);
  int64_t misses = -1;
  moe_generation_expert_stats(g, &misses, nullptr, nullptr);
  CHECK(home == MOE_EXPERTS_RESIDENT ? misses == 0 : misses > 0);
  moe_generation_destroy(g);
  return out;
}

std::vector<int32_t> token_ids(const std::vector<GeneratedToken>& tokens) {
  std::vector<int32_t> out;
  for (const GeneratedToken& t : tokens) out.push_back(t.token);
  return out;
}

}  // namespace

// A session on a model folder, with no engine: our checkpoint and its Hugging Face export (the session's own seed
// differs, so every weight must come from the folder) and a LoRA fine-tune's checkpoint give the tokens of the
// model that wrote them, with the experts resident, in the host tier or streamed into the SSD tier; a folder
// that is not a model and bad options are refused, naming what is wrong.
TEST(c_api_session_on_a_model_folder_generates_the_models_tokens) {
  const int homes[] = {MOE_EXPERTS_RESIDENT, MOE_EXPERTS_HOST, MOE_EXPERTS_SSD};
  ModelConfig deepseek = shrink(preset("deepseek-v2-lite"));
  deepseek.shared_expert_d_ff = 2 * deepseek.expert_d_ff;  // two shared experts, as deepseek_v2 stores them
  const ModelConfig cfg = parse_model_config(model_config_to_json(deepseek));
  moe_engine* engine = c_api_engine(cfg);
  if (!engine) return;
  const std::string ours = moe_test::tmp_path("folder_ours"), hf = moe_test::tmp_path("folder_hf");
  CHECK(moe_engine_save_checkpoint(engine, ours.c_str()) == MOE_OK);
  CHECK_MSG(moe_engine_export_hf(engine, hf.c_str(), "deepseek_v2", MOE_EXPORT_F32) == MOE_OK, moe_engine_last_error(engine));
  moe_engine_destroy(engine);
  const std::vector<int32_t> prompt = random_tokens(4, cfg.vocab_size, 9);
  const std::vector<int32_t> expect = token_ids(greedy_tokens(cfg, prompt));
  for (const std::string& dir : {ours, hf})
    for (int home : homes)
      CHECK_MSG(folder_tokens(dir, home, prompt, expect.size()) == expect, dir + ", home " + std::to_string(home));
  // In bf16 compute too, whatever the experts' home (the SSD tier's records then hold the linear weights in bf16).
  const char* bf16 = R"({"train": {"threads": 2, "seed": 77, "compute_dtype": "bf16"}})";
  const std::vector<int32_t> expect_bf16 = folder_tokens(hf, MOE_EXPERTS_RESIDENT, prompt, expect.size(), bf16);
  for (int home : {MOE_EXPERTS_HOST, MOE_EXPERTS_SSD})
    CHECK_MSG(folder_tokens(hf, home, prompt, expect.size(), bf16) == expect_bf16, "bf16, home " + std::to_string(home));

  auto be = make_backend("cpu", {2});
  const EngineConfig lora = parse_config_text(
      finetune_test::config(finetune_test::families()[3].second,
                            R"({"method": "lora", "lora": {"rank": 4, "alpha": 8, "targets": ["attention", "experts"]}})"),
      "test");
  const std::unique_ptr<Model> tuned_model = lora_model(lora, *be, ComputeDtype::F32);
  Model& model = *tuned_model;
  const std::string tuned = moe_test::tmp_path("folder_lora");
  save_checkpoint(tuned, lora, model, nullptr, nullptr);
  GenerateOptions opt;
  opt.max_tokens = 8;
  const std::vector<int32_t> tuned_expect = token_ids(Generator(model).generate(prompt, opt));
  for (int home : homes)
    CHECK_MSG(folder_tokens(tuned, home, prompt, tuned_expect.size()) == tuned_expect, "LoRA, home " + std::to_string(home));

  moe_generate_options o{};
  o.struct_size = sizeof o;
  char err[512] = {0};
  CHECK(moe_generation_open(moe_test::tmp_dir().c_str(), nullptr, &o, err, sizeof err) == nullptr);
  CHECK_MSG(std::string(err).find("config.json") != std::string::npos, err);
  o.top_p = 2;
  CHECK(moe_generation_open(ours.c_str(), nullptr, &o, err, sizeof err) == nullptr);
  CHECK_MSG(std::string(err).find("sampling.top_p") != std::string::npos, err);
}

TEST_MAIN()
