// The C API's generation sessions (moe_generation_*): a Generator on an engine's model or on a model folder's,
// with its routed experts resident or served from the host or SSD tier through a cache of device slots.
#include <cstring>
#include <memory>
#include <string>

#include "capi_engine.h"
#include "core/error.h"
#include "infer/expert_slots.h"
#include "infer/generator.h"

struct moe_generation {
  moe_engine* engine = nullptr;  // the engine whose model this runs; null for a session on a model folder
  moe_capi::FolderModel folder;  // a folder session's own model (declared first: destroyed after what reads it)
  moe::Model* model = nullptr;
  std::unique_ptr<moe::ExpertSlotCache> slots;
  std::unique_ptr<moe::Generator> generator;
  moe::SamplingOptions sampling;
  uint64_t draws = 0;
  std::string last_error;
  std::vector<int32_t> experts, layers;  // what the last moe_generated_token points into
};

namespace {

using moe_capi::guarded;

int slot_count(const moe::Model& model, const moe_generate_options& o) {
  return o.expert_slots > 0 ? o.expert_slots : 2 * model.config().top_k;
}
int cache_entries(const moe::Model& model, const moe_generate_options& o) {
  return o.cache_experts > 0 ? o.cache_experts : moe_capi::default_cache_experts(model.config());
}

// The options as this engine knows them (members past the caller's struct_size stay 0), each checked.
moe_generate_options checked_options(const moe_generate_options* given) {
  moe::check(given != nullptr && given->struct_size >= offsetof(moe_generate_options, seed) + sizeof(uint64_t),
             "generate: the options are missing or too short (set struct_size)");
  moe_generate_options o{};
  std::memcpy(&o, given, std::min<size_t>(given->struct_size, sizeof o));
  moe::check_sampling({o.temperature, o.top_k, o.top_p == 0 ? 1.0 : o.top_p, o.seed});
  moe::check(o.expert_home >= MOE_EXPERTS_RESIDENT && o.expert_home <= MOE_EXPERTS_SSD,
             "generate: expert_home " + std::to_string(o.expert_home) +
                 " is not MOE_EXPERTS_RESIDENT, MOE_EXPERTS_HOST or MOE_EXPERTS_SSD");
  moe::check(o.expert_slots >= 0, "generate: expert_slots must be >= 0");
  moe::check(o.cache_experts >= 0, "generate: cache_experts must be >= 0");
  return o;
}

// The slot cache for an expert_home that is not resident: the arena (host) or a fresh SSD tier written from it.
std::unique_ptr<moe::ExpertSlotCache> tier_slots(moe::Model& model, const moe_generate_options& o) {
  moe::OffloadConfig ssd;
  ssd.cache_experts = cache_entries(model, o);
  if (o.ssd_dir) ssd.ssd_dir = o.ssd_dir;
  return std::make_unique<moe::ExpertSlotCache>(
      model.backend(), model.layout(), model.param_ptrs(), model.params(),
      o.expert_home == MOE_EXPERTS_SSD ? moe::ExpertHome::Ssd : moe::ExpertHome::Host, slot_count(model, o), ssd);
}

// The session's sampling, generator and MoE layer list, once its model and slots are set.
void start(moe_generation& g, const moe_generate_options& o) {
  g.sampling = {o.temperature, o.top_k, o.top_p == 0 ? 1.0 : o.top_p, o.seed};
  g.generator = std::make_unique<moe::Generator>(*g.model, g.slots.get());
  for (int l = 0; l < g.model->config().n_layers; ++l)
    if (g.model->config().is_moe_layer(l)) g.layers.push_back(l);
}

}  // namespace

extern "C" {

moe_generation* moe_generation_create(moe_engine* engine, const moe_generate_options* given) {
  if (!engine) return nullptr;
  try {
    engine->last_error.clear();
    const moe_generate_options o = checked_options(given);
    auto g = std::make_unique<moe_generation>();
    g->engine = engine;
    engine->trainer->settle();
    g->model = &engine->trainer->model();
    moe::Model& model = *g->model;
    if (moe::ExpertStateHome* apart = engine->trainer->expert_home()) {
      // An engine training with its experts apart from the arenas (the SSD tier; the host tier beside a device):
      // they stream from that home through the slots whatever expert_home asks, never all copied out.
      g->slots = std::make_unique<moe::ExpertSlotCache>(model.backend(), model.layout(), model.param_ptrs(),
                                                        model.params(), *apart, slot_count(model, o));
    } else if (o.expert_home != MOE_EXPERTS_RESIDENT) {
      g->slots = tier_slots(model, o);
    }
    start(*g, o);
    return g.release();
  } catch (const std::exception& e) {
    engine->last_error = e.what();
    return nullptr;
  }
}

moe_generation* moe_generation_open(const char* model_dir, const char* config_json, const moe_generate_options* given,
                                    char* err, size_t err_len) {
  try {
    moe::check(model_dir != nullptr && *model_dir != 0, "generate: no model folder");
    const moe_generate_options o = checked_options(given);
    auto g = std::make_unique<moe_generation>();
    // Under the SSD home the load writes each expert into the tier's file, and the slots read them back from there.
    const std::string ssd_dir = o.ssd_dir ? o.ssd_dir : "";
    g->folder = moe_capi::open_folder_model(model_dir, config_json,
                                            o.expert_home == MOE_EXPERTS_SSD ? &ssd_dir : nullptr, o.cache_experts,
                                            o.base_dir ? o.base_dir : "", true);
    g->model = g->folder.model.get();
    moe::Model& model = *g->model;
    if (g->folder.experts)
      g->slots = std::make_unique<moe::ExpertSlotCache>(model.backend(), model.layout(), model.param_ptrs(),
                                                        model.params(), *g->folder.experts, slot_count(model, o));
    else if (o.expert_home == MOE_EXPERTS_HOST)
      g->slots = tier_slots(model, o);
    // The session's own model: its experts are served by the slots, so bf16 compute keeps no copies of them (the
    // SSD home's arena ranges are never touched).
    if (g->slots) model.set_expert_access(g->slots.get());
    // Set before the weights are read: each linear weight is laid out as it arrives (Model::weights_loaded).
    model.set_inference_only();
    moe_capi::load_folder_weights(g->folder);
    start(*g, o);
    return g.release();
  } catch (const std::exception& e) {
    moe_capi::copy_error(err, err_len, e.what());
    return nullptr;
  }
}

void moe_generation_destroy(moe_generation* generation) { delete generation; }

const char* moe_generation_last_error(const moe_generation* g) { return g ? g->last_error.c_str() : "no session"; }

int moe_generation_feed(moe_generation* g, const int32_t* tokens, int32_t n) {
  return guarded(g, [&] {
    moe::check(tokens != nullptr && n > 0, "feed: no tokens");
    g->generator->feed(tokens, n);
    return MOE_OK;
  });
}

int moe_generation_step(moe_generation* g, moe_generated_token* out) {
  return guarded(g, [&] {
    moe::check(out != nullptr && out->struct_size >= sizeof(uint32_t), "step: set the token's struct_size");
    moe::Generator& gen = *g->generator;
    // A token sampled now would need the position after the model's last to be fed.
    if (g->draws > 0 && gen.position() >= g->model->config().max_seq_len) return MOE_FINISHED;
    const moe::GeneratedToken t = gen.step(g->sampling, g->draws++);
    g->experts.clear();
    for (const auto& layer : t.experts) g->experts.insert(g->experts.end(), layer.begin(), layer.end());
    moe_generated_token r{};
    r.struct_size = sizeof r;
    r.token = t.token;
    r.position = gen.position() - 1;
    r.moe_layers = static_cast<int32_t>(t.experts.size());
    r.top_k = t.experts.empty() ? 0 : static_cast<int32_t>(t.experts[0].size());
    r.experts = g->experts.data();
    r.layers = g->layers.data();
    const uint32_t size = out->struct_size;
    std::memcpy(out, &r, std::min<size_t>(size, sizeof r));
    out->struct_size = size;
    return MOE_OK;
  });
}

int moe_generation_reset(moe_generation* g) {
  return guarded(g, [&] {
    g->generator->reset();
    g->draws = 0;
    return MOE_OK;
  });
}

int32_t moe_generation_position(const moe_generation* g) { return g ? g->generator->position() : 0; }

int moe_generation_expert_stats(const moe_generation* g, int64_t* misses, int64_t* hits, int64_t* bytes_uploaded) {
  if (!g) return MOE_ERROR;
  const moe::ExpertSlotStats s = g->slots ? g->slots->stats() : moe::ExpertSlotStats{};
  if (misses) *misses = s.misses;
  if (hits) *hits = s.hits;
  if (bytes_uploaded) *bytes_uploaded = s.bytes_uploaded;
  return MOE_OK;
}

}  // extern "C"
