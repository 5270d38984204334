// Our checkpoint directory: bitwise save/load of parameters, AdamW moments and trainer state; rejection of
// mismatched or corrupt checkpoints without touching the model; atomic replacement when a save fails midway.
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "test_files.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/safetensors.h"

using namespace moe;
using moe_test::expect_error;
using moe_test::tmp_dir;
using moe_test::tmp_path;


namespace {

ModelConfig tiny_mixtral() {
  ModelConfig m;
  m.family = "mixtral";
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.max_seq_len = 16;
  m.d_ff = 24;
  m.expert_d_ff = 12;
  m.n_experts = {4, 4};
  m.top_k = 2;
  m.tie_embeddings = false;
  m.qkv_bias = false;
  return m;
}

// gpt-moe with every optional block: a dense layer, a PR-MoE pyramid, a gated shared expert and a residual MLP.
ModelConfig tiny_gpt() {
  ModelConfig m;
  m.family = "gpt-moe";
  m.vocab_size = 32;
  m.d_model = 16;
  m.n_layers = 4;
  m.n_heads = 2;
  m.n_kv_heads = 2;
  m.max_seq_len = 8;
  m.d_ff = 20;
  m.expert_d_ff = 12;
  m.moe_every = 2;
  m.n_experts = {2, 4};
  m.top_k = 2;
  m.shared_expert_d_ff = 8;
  m.shared_expert_gate = true;
  m.residual_mlp = true;
  m.capacity_factor = 1.25;
  return m;
}

EngineConfig engine_config(const ModelConfig& m) {
  EngineConfig c;
  c.model = m;
  c.train.seq_len = m.max_seq_len;
  c.train.seed = 7;
  return c;
}

std::vector<float> host_copy(Backend& be, const float* src, size_t n) {
  std::vector<float> h(n);
  be.copy(h.data(), src, n * sizeof(float));
  return h;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Bitwise equality of every tensor of the layout (the alignment padding between tensors is not stored).
bool same_tensors(const ParamLayout& layout, const std::vector<float>& a, const std::vector<float>& b) {
  for (const ParamTensor& t : layout.tensors())
    if (std::memcmp(a.data() + t.offset, b.data() + t.offset, t.numel * sizeof(float)) != 0) return false;
  return true;
}

void fill_random(Backend& be, float* dst, size_t n, uint64_t stream) {
  std::vector<float> h = moe_test::random_vector(n, stream);
  be.copy(dst, h.data(), n * sizeof(float));
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

std::string slurp(const std::string& path) { return fs::read_file(path, 1 << 30); }

// Delegates to the CPU backend; once armed, the copy numbered `fail_at` (counting from arming) throws, as a
// device-to-host copy failing in the middle of a save would.
class FailingBackend : public Backend {
 public:
  explicit FailingBackend(Backend& inner) : in_(inner) {}
  void arm(int fail_at) { countdown_ = fail_at; }

  std::string name() const override { return "failing"; }
  std::string describe() const override { return "failing copies over " + in_.describe(); }
  int threads() const override { return in_.threads(); }
  void* alloc(MemKind k, size_t b) override { return in_.alloc(k, b); }
  void release(MemKind k, void* p) override { in_.release(k, p); }
  void copy(void* d, const void* s, size_t b) override {
    if (countdown_ > 0 && --countdown_ == 0) fail("simulated copy failure");
    in_.copy(d, s, b);
  }
  void zero(void* p, size_t b) override { in_.zero(p, b); }
  void synchronize() override { in_.synchronize(); }
  void matmul_forward(float* y, const float* x, const float* w, const float* b, int N, int I, int O) override {
    in_.matmul_forward(y, x, w, b, N, I, O);
  }
  void lora_forward(float* y, const float* x, const float* A, const float* B, int N, int I, int O, int r, float scale,
                    int ldy, const LoraDropoutMask& drop) override {
    in_.lora_forward(y, x, A, B, N, I, O, r, scale, ldy, drop);
  }
  void lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* A, const float* B,
                     int N, int I, int O, int r, float scale, int ldy, const LoraDropoutMask& drop) override {
    in_.lora_backward(dx, dA, dB, dy, x, A, B, N, I, O, r, scale, ldy, drop);
  }
  void matmul_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N,
                       int I, int O) override {
    in_.matmul_backward(dx, dw, db, dy, x, w, N, I, O);
  }
  void embedding_forward(float* o, const int32_t* t, const float* wte, const float* wpe, int B, int T,
                         int C) override {
    in_.embedding_forward(o, t, wte, wpe, B, T, C);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* d, const int32_t* t, int B, int T, int C) override {
    in_.embedding_backward(dwte, dwpe, d, t, B, T, C);
  }
  void layernorm_forward(float* o, float* m, float* r, const float* x, const float* w, const float* b, int N, int C,
                         float eps) override {
    in_.layernorm_forward(o, m, r, x, w, b, N, C, eps);
  }
  void layernorm_backward(float* dx, float* dw, float* db, const float* d, const float* x, const float* w,
                          const float* m, const float* r, int N, int C) override {
    in_.layernorm_backward(dx, dw, db, d, x, w, m, r, N, C);
  }
  void rmsnorm_forward(float* o, float* r, const float* x, const float* w, int N, int C, float eps) override {
    in_.rmsnorm_forward(o, r, x, w, N, C, eps);
  }
  void rmsnorm_backward(float* dx, float* dw, const float* d, const float* x, const float* w, const float* r, int N,
                        int C) override {
    in_.rmsnorm_backward(dx, dw, d, x, w, r, N, C);
  }
  void rope_forward(float* o, const float* x, int B, int T, const RopeSpec& s) override { in_.rope_forward(o, x, B, T, s); }
  void rope_backward(float* dx, const float* d, int B, int T, const RopeSpec& s) override {
    in_.rope_backward(dx, d, B, T, s);
  }
  void qk_norm_forward(float* o, float* r, const float* x, const float* qw, const float* kw, int N, int NH, int NKV,
                       int HS, bool ph, float eps) override {
    in_.qk_norm_forward(o, r, x, qw, kw, N, NH, NKV, HS, ph, eps);
  }
  void qk_norm_backward(float* dx, float* dqw, float* dkw, const float* d, const float* x, const float* qw,
                        const float* kw, const float* r, int N, int NH, int NKV, int HS, bool ph) override {
    in_.qk_norm_backward(dx, dqw, dkw, d, x, qw, kw, r, N, NH, NKV, HS, ph);
  }
  void clamp_forward(float* o, const float* x, int64_t n, float c) override { in_.clamp_forward(o, x, n, c); }
  void clamp_backward(float* dx, const float* d, const float* x, int64_t n, float c) override {
    in_.clamp_backward(dx, d, x, n, c);
  }
  void attention_forward(float* o, float* lse, const float* qkv, int B, int T, int NH, int NKV, int HS,
                         const AttentionSpec& spec) override {
    in_.attention_forward(o, lse, qkv, B, T, NH, NKV, HS, spec);
  }
  void attention_backward(float* dqkv, const float* d, const float* qkv, const float* o, const float* lse, int B,
                          int T, int NH, int NKV, int HS, const AttentionSpec& spec) override {
    in_.attention_backward(dqkv, d, qkv, o, lse, B, T, NH, NKV, HS, spec);
  }
  void gelu_forward(float* o, const float* x, int64_t n) override { in_.gelu_forward(o, x, n); }
  void gelu_backward(float* dx, const float* x, const float* d, int64_t n) override { in_.gelu_backward(dx, x, d, n); }
  void swiglu_forward(float* o, const float* gu, int N, int F) override { in_.swiglu_forward(o, gu, N, F); }
  void swiglu_backward(float* dgu, const float* d, const float* gu, int N, int F) override {
    in_.swiglu_backward(dgu, d, gu, N, F);
  }
  void swiglu_clamped_forward(float* o, const float* gu, int N, int F, float a, float l) override {
    in_.swiglu_clamped_forward(o, gu, N, F, a, l);
  }
  void swiglu_clamped_backward(float* dgu, const float* d, const float* gu, int N, int F, float a, float l) override {
    in_.swiglu_clamped_backward(dgu, d, gu, N, F, a, l);
  }
  void add_forward(float* o, const float* a, const float* b, int64_t n) override { in_.add_forward(o, a, b, n); }
  void accumulate(float* d, const float* s, int64_t n) override { in_.accumulate(d, s, n); }
  void crossentropy_forward(float* l, const float* lg, const int32_t* t, int N, int V) override {
    in_.crossentropy_forward(l, lg, t, N, V);
  }
  void crossentropy_backward(float* dl, const float* lg, const int32_t* t, float s, int N, int V) override {
    in_.crossentropy_backward(dl, lg, t, s, N, V);
  }
  RouterLosses router_forward(float* p, int32_t* idx, float* w, const float* lg, int N, int E, int K,
                              const RouterSpec& spec, const int32_t* forced) override {
    return in_.router_forward(p, idx, w, lg, N, E, K, spec, forced);
  }
  void router_backward(float* dl, const float* dw, const float* p, const int32_t* idx, const float* w,
                       const float* lg, int N, int E, int K, const RouterSpec& spec, float aux, float z) override {
    in_.router_backward(dl, dw, p, idx, w, lg, N, E, K, spec, aux, z);
  }
  void dispatch_plan(DispatchPlan& plan, const int32_t* idx, int N, int E, int K, int cap) override {
    in_.dispatch_plan(plan, idx, N, E, K, cap);
  }
  void permute_forward(float* xs, const float* x, const DispatchPlan& plan, int C) override {
    in_.permute_forward(xs, x, plan, C);
  }
  void permute_backward(float* dx, const float* dxs, const DispatchPlan& plan, int C) override {
    in_.permute_backward(dx, dxs, plan, C);
  }
  void combine_forward(float* y, const float* ys, const float* w, const DispatchPlan& plan, int C) override {
    in_.combine_forward(y, ys, w, plan, C);
  }
  void combine_backward(float* dys, float* dw, const float* dy, const float* ys, const float* w,
                        const DispatchPlan& plan, int C) override {
    in_.combine_backward(dys, dw, dy, ys, w, plan, C);
  }
  void sigmoid_gate_forward(float* o, const float* g, const float* s, int N, int C) override {
    in_.sigmoid_gate_forward(o, g, s, N, C);
  }
  void sigmoid_gate_backward(float* dg, float* ds, const float* d, const float* g, const float* s, int N,
                             int C) override {
    in_.sigmoid_gate_backward(dg, ds, d, g, s, N, C);
  }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWParams& hp) override {
    in_.adamw_update(p, g, m, v, n, hp);
  }
  double sum_squares(const float* x, int64_t n) override { return in_.sum_squares(x, n); }

 private:
  Backend& in_;
  int countdown_ = 0;
};

// Rewrites dir/model.safetensors with the model's tensors, letting `edit` drop, replace or add entries.
struct StoredTensor {
  std::string name;
  st::DType dtype;
  std::vector<uint8_t> bytes;
  std::vector<int64_t> shape;
};

void rewrite_model_file(const std::string& dir, Model& model,
                        const std::function<void(std::vector<StoredTensor>&)>& edit) {
  std::vector<float> host = host_copy(model.backend(), model.params(), model.num_params());
  std::vector<StoredTensor> tensors;
  for (const ParamTensor& t : model.layout().tensors()) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(host.data() + t.offset);
    tensors.push_back({t.name, st::DType::F32, std::vector<uint8_t>(p, p + t.numel * 4), t.shape});
  }
  edit(tensors);
  st::Writer w;
  for (const StoredTensor& t : tensors) w.add(t.name, t.dtype, t.bytes.data(), t.shape);
  w.write(fs::join(dir, "model.safetensors"));
}

void check_roundtrip(const ModelConfig& mc, const std::string& label) {
  auto be = make_backend("cpu", {2});
  EngineConfig cfg = engine_config(mc);
  Model a(cfg.model, *be);
  a.init(11);
  AdamWOptimizer opt_a(a);
  fill_random(*be, opt_a.m(), a.num_params(), 1);
  fill_random(*be, opt_a.v(), a.num_params(), 2);
  TrainerState st{1234, (1ull << 40) + 3, 987654321, 1337, "/data/shard-0.bin"};
  const std::string dir = tmp_path("roundtrip-" + label);
  save_checkpoint(dir, cfg, a, &opt_a, &st);

  CHECK(!is_hf_checkpoint(dir));
  ModelConfig read = read_checkpoint_model_config(dir);
  CHECK_MSG(json::dump(model_config_to_json(read)) == json::dump(model_config_to_json(mc)), label + ": config");
  EngineConfig full = parse_config_text(slurp(fs::join(dir, "config.json")), "config.json");
  CHECK(full.train.seed == 7);

  Model b(read, *be);
  b.init(99);
  AdamWOptimizer opt_b(b);
  load_weights(dir, b);
  TrainerState got;
  CHECK(load_optimizer_state(dir, b, opt_b, got));
  const size_t n = a.num_params();
  CHECK_MSG(same_bits(host_copy(*be, a.params(), n), host_copy(*be, b.params(), n)), label + ": params");
  CHECK_MSG(same_tensors(a.layout(), host_copy(*be, opt_a.m(), n), host_copy(*be, opt_b.m(), n)), label + ": m");
  CHECK_MSG(same_tensors(a.layout(), host_copy(*be, opt_a.v(), n), host_copy(*be, opt_b.v(), n)), label + ": v");
  CHECK(got.step == st.step && got.data_cursor == st.data_cursor && got.tokens_seen == st.tokens_seen);
  CHECK(got.seed == st.seed && got.data_path == st.data_path);

  // Every stored tensor has the layout's name, shape and F32 dtype.
  st::Reader r(fs::join(dir, "model.safetensors"));
  CHECK(r.tensors().size() == a.layout().tensors().size());
  for (const ParamTensor& t : a.layout().tensors()) {
    const st::TensorInfo* info = r.find(t.name);
    CHECK_MSG(info && info->shape == t.shape && info->dtype == st::DType::F32, label + ": stored " + t.name);
  }
  json::Value state = json::parse(slurp(fs::join(dir, "trainer_state.json")));
  CHECK(state.find("format")->string == "moe-engine-checkpoint");
  CHECK(state.find("version")->number == 1);
}

}  // namespace

TEST(roundtrip_mixtral) { check_roundtrip(tiny_mixtral(), "mixtral"); }

TEST(roundtrip_gpt_moe) { check_roundtrip(tiny_gpt(), "gpt"); }

TEST(weights_only_checkpoint_has_no_optimizer_state) {
  auto be = make_backend("cpu", {2});
  Model a(tiny_mixtral(), *be);
  a.init(3);
  const std::string dir = tmp_path("weights-only");
  save_checkpoint(dir, engine_config(a.config()), a, nullptr, nullptr);
  CHECK(!fs::exists(fs::join(dir, "optimizer.safetensors")));
  CHECK(!fs::exists(fs::join(dir, "trainer_state.json")));
  AdamWOptimizer opt(a);
  TrainerState s;
  s.step = 5;
  CHECK(!load_optimizer_state(dir, a, opt, s));
  CHECK(!read_trainer_state(dir, s));
  CHECK(s.step == 5);
}

TEST(save_rejects_mismatched_config) {
  auto be = make_backend("cpu", {2});
  Model a(tiny_mixtral(), *be);
  EngineConfig cfg = engine_config(a.config());
  cfg.model.top_k = 1;
  expect_error([&] { save_checkpoint(tmp_path("mismatch"), cfg, a, nullptr, nullptr); }, {"model"}, "config");
  CHECK(!fs::exists(tmp_path("mismatch")));
}

TEST(load_rejects_bad_checkpoints_without_changing_the_model) {
  auto be = make_backend("cpu", {2});
  Model src(tiny_mixtral(), *be);
  src.init(1);
  Model dst(tiny_mixtral(), *be);
  dst.init(2);
  const std::vector<float> before = host_copy(*be, dst.params(), dst.num_params());
  const std::string dir = tmp_path("bad");
  save_checkpoint(dir, engine_config(src.config()), src, nullptr, nullptr);
  // The parser's own checks, as a checkpoint without a checksum manifest gets them (written by an older engine,
  // or its manifest lost); with one, any of these rewrites fails the checksum first (test_checkpoint_checksums).
  fs::remove_all(fs::join(dir, "checksums.json"));

  auto attempt = [&](const std::vector<std::string>& needles, const std::string& label) {
    expect_error([&] { load_weights(dir, dst); }, needles, label);
    CHECK_MSG(same_bits(before, host_copy(*be, dst.params(), dst.num_params())), label + ": model changed");
  };
  auto drop = [](const std::string& name) {
    return [name](std::vector<StoredTensor>& ts) {
      std::erase_if(ts, [&](const StoredTensor& t) { return t.name == name; });
    };
  };
  // The missing and misshapen tensors come last in the file, so a partial load would have changed the model.
  rewrite_model_file(dir, src, drop("lm_head.weight"));
  attempt({"lm_head.weight", "missing", "[32, 16]"}, "missing");

  rewrite_model_file(dir, src, [](std::vector<StoredTensor>& ts) {
    ts.back().shape = {16, 32};
  });
  attempt({"lm_head.weight", "shape [16, 32]", "expected [32, 16]"}, "shape");

  rewrite_model_file(dir, src, [](std::vector<StoredTensor>& ts) {
    ts.push_back({"layers.0.attn.extra.weight", st::DType::F32, std::vector<uint8_t>(16), {4}});
  });
  attempt({"layers.0.attn.extra.weight", "unexpected"}, "extra");

  rewrite_model_file(dir, src, [](std::vector<StoredTensor>& ts) { ts.back().dtype = st::DType::I32; });
  attempt({"lm_head.weight", "I32"}, "dtype");

  rewrite_model_file(dir, src, [](std::vector<StoredTensor>&) {});
  const std::string file = fs::join(dir, "model.safetensors");
  std::string bytes = slurp(file);
  bytes.resize(bytes.size() - 10);
  fs::write_file_atomic(file, bytes);
  attempt({"model.safetensors"}, "truncated");

  bytes = slurp(file);
  bytes[8] = 'x';
  fs::write_file_atomic(file, bytes);
  attempt({"model.safetensors"}, "corrupt header");

  // An intact file loads.
  rewrite_model_file(dir, src, [](std::vector<StoredTensor>&) {});
  load_weights(dir, dst);
  CHECK(same_bits(host_copy(*be, src.params(), src.num_params()), host_copy(*be, dst.params(), dst.num_params())));
}

TEST(load_optimizer_rejects_mismatch_without_changing_state) {
  auto be = make_backend("cpu", {2});
  Model a(tiny_mixtral(), *be);
  a.init(1);
  AdamWOptimizer opt(a);
  fill_random(*be, opt.m(), a.num_params(), 5);
  TrainerState st;
  st.step = 3;
  const std::string dir = tmp_path("opt-mismatch");
  save_checkpoint(dir, engine_config(a.config()), a, &opt, &st);
  fs::remove_all(fs::join(dir, "checksums.json"));  // the parser's checks, as without a manifest

  ModelConfig other = tiny_mixtral();
  other.expert_d_ff = 8;
  Model b(other, *be);
  AdamWOptimizer opt_b(b);
  fill_random(*be, opt_b.m(), b.num_params(), 6);
  const std::vector<float> m_before = host_copy(*be, opt_b.m(), b.num_params());
  TrainerState got;
  got.step = 77;
  expect_error([&] { load_optimizer_state(dir, b, opt_b, got); }, {"m.layers.0.moe.experts.0.down.weight", "[16, 12]", "expected [16, 8]"},
               "moments");
  CHECK(got.step == 77);
  CHECK(same_bits(m_before, host_copy(*be, opt_b.m(), b.num_params())));

  fs::remove_all(fs::join(dir, "trainer_state.json"));
  expect_error([&] { load_optimizer_state(dir, a, opt, got); }, {"trainer_state.json"}, "no state");

  fs::write_file_atomic(fs::join(dir, "trainer_state.json"), std::string("{\"format\": \"moe-engine-checkpoint\", "
                                                                          "\"version\": 1, \"step\": -1}"));
  expect_error([&] { read_trainer_state(dir, got); }, {"trainer_state.json", "step"}, "bad state");
}

TEST(failed_save_keeps_the_old_checkpoint) {
  auto cpu = make_backend("cpu", {2});
  FailingBackend be(*cpu);
  Model old_model(tiny_mixtral(), be);
  old_model.init(1);
  AdamWOptimizer old_opt(old_model);
  TrainerState old_state;
  old_state.step = 10;
  const std::string dir = tmp_path("atomic");
  save_checkpoint(dir, engine_config(old_model.config()), old_model, &old_opt, &old_state);
  const std::string old_weights = slurp(fs::join(dir, "model.safetensors"));
  const std::string old_optim = slurp(fs::join(dir, "optimizer.safetensors"));

  Model new_model(tiny_mixtral(), be);
  new_model.init(2);
  AdamWOptimizer new_opt(new_model);
  TrainerState new_state;
  new_state.step = 20;
  // Copy 1 (the parameters) succeeds and model.safetensors is written; copy 2 (the first moment) fails.
  be.arm(2);
  expect_error([&] { save_checkpoint(dir, engine_config(new_model.config()), new_model, &new_opt, &new_state); },
               {"simulated copy failure"}, "midway");
  CHECK(slurp(fs::join(dir, "model.safetensors")) == old_weights);
  CHECK(slurp(fs::join(dir, "optimizer.safetensors")) == old_optim);
  TrainerState got;
  CHECK(read_trainer_state(dir, got) && got.step == 10);
  std::vector<std::string> names = list_dir(tmp_dir());
  for (const std::string& n : names) CHECK_MSG(n.find("atomic.") == std::string::npos, "leftover " + n);

  // A state that JSON cannot hold exactly fails before anything is written.
  new_state.data_cursor = (1ull << 60);
  expect_error([&] { save_checkpoint(dir, engine_config(new_model.config()), new_model, &new_opt, &new_state); },
               {"data_cursor"}, "state range");
  CHECK(slurp(fs::join(dir, "model.safetensors")) == old_weights);

  // And a complete save replaces it.
  new_state.data_cursor = 0;
  save_checkpoint(dir, engine_config(new_model.config()), new_model, &new_opt, &new_state);
  CHECK(read_trainer_state(dir, got) && got.step == 20);
  CHECK(slurp(fs::join(dir, "model.safetensors")) != old_weights);
}

TEST(save_refuses_to_replace_a_non_checkpoint_directory) {
  auto be = make_backend("cpu", {2});
  Model a(tiny_mixtral(), *be);
  const std::string dir = tmp_path("not-a-checkpoint");
  fs::mkdirs(dir);
  fs::write_file_atomic(fs::join(dir, "notes.txt"), std::string("keep me"));
  expect_error([&] { save_checkpoint(dir, engine_config(a.config()), a, nullptr, nullptr); },
               {"not-a-checkpoint", "not a checkpoint"}, "guard");
  CHECK(slurp(fs::join(dir, "notes.txt")) == "keep me");
  fs::remove_all(fs::join(dir, "notes.txt"));
  save_checkpoint(dir, engine_config(a.config()), a, nullptr, nullptr);  // empty: fine
  CHECK(fs::exists(fs::join(dir, "model.safetensors")));
}

// The estimate a run's start checks the disk against bounds what a save writes, closely; the refusal names both
// sizes and counts the SSD tier's file when it shares the disk.
TEST(checkpoint_bytes_bounds_a_save_and_the_space_check_names_both_sizes) {
  auto be = make_backend("cpu", {2});
  Model a(tiny_mixtral(), *be);
  a.init(3);
  AdamWOptimizer opt(a);
  TrainerState st;
  const std::string dir = tmp_path("sized");
  save_checkpoint(dir, engine_config(a.config()), a, &opt, &st);
  uint64_t written = 0;
  for (const std::string& n : list_dir(dir)) written += std::filesystem::file_size(fs::join(dir, n));
  const uint64_t estimate = checkpoint_bytes(a, true);
  CHECK_MSG(estimate >= written && estimate <= written + (2u << 20),
            "estimate " + std::to_string(estimate) + " against " + std::to_string(written) + " written");
  CHECK(checkpoint_bytes(a, false) < estimate);

  CHECK(checkpoint_space_error("/runs/a", 10'000'000'000, 1, -1, 10'000'000'000).empty());
  CHECK(checkpoint_space_error("/runs/a", 10'000'000'000, 1, -1, -1).empty());  // the disk does not say
  const std::string alone = checkpoint_space_error("/runs/a", 10'000'000'000, 1, -1, 4'000'000'000);
  for (const char* needle : {"a checkpoint of this run takes about 10.00 GB", "/runs/a has 4.00 GB free", "fail at a save"})
    CHECK_MSG(alone.find(needle) != std::string::npos, alone + " lacks " + needle);
  CHECK(alone.find("SSD") == std::string::npos && alone.find("keep_checkpoints") == std::string::npos);
  const std::string beside = checkpoint_space_error("/runs/a", 3'000'000'000, 1, 5'000'000'000, 7'000'000'000);
  for (const char* needle : {"expert file may still take 5.00 GB", "has 7.00 GB free", "offload.ssd_dir"})
    CHECK_MSG(beside.find(needle) != std::string::npos, beside + " lacks " + needle);
  CHECK(checkpoint_space_error("/runs/a", 3'000'000'000, 1, 4'000'000'000, 7'000'000'000).empty());
  // Several at once: all of them against the disk, and what to change.
  const std::string many = checkpoint_space_error("/runs/a", 3'000'000'000, 3, -1, 7'000'000'000);
  for (const char* needle : {"keeps up to 3 checkpoints of about 3.00 GB each on disk (9.00 GB)", "train.keep_checkpoints",
                             "train.checkpoint_every"})
    CHECK_MSG(many.find(needle) != std::string::npos, many + " lacks " + needle);
  CHECK(checkpoint_space_error("/runs/a", 3'000'000'000, 2, -1, 7'000'000'000).empty());
}

TEST(cleanup) { fs::remove_all(tmp_dir()); }

TEST_MAIN()
