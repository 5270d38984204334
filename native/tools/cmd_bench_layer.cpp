// `moe-engine-dev bench --layer`: one MoE layer of a real model's shape, as training runs it: the router, dispatch,
// every routed expert (and the shared experts), the combine, the hand-written backward, and AdamW over the layer's
// parameters; in fp32 or in bf16 mixed precision (the experts and shared experts on bf16 weight copies of the fp32
// masters, which AdamW writes with each update, the router in fp32, exactly as train.compute_dtype "bf16" runs
// them).
//   --C N --E N --F N --K N [--shared-F N] [--tokens N] [--dtype fp32|bf16|fp32,bf16] [--threads N] [--no-optimizer]
//   [--json] [--lora R] [--steps N] [--no-pack]
// With --lora and bf16, the frozen weights' bf16 copies are kept by the backend (Backend::keep_bf16_weights: packed
// once, as training keeps a frozen base's); --no-pack makes every bf16 GEMM pack its weight anew instead, and
// --compare-pack times both side by side (see compare_pack).
// Each dtype runs a warm-up step, then --steps timed steps (default 3), and reports their median.
// Both dtypes run one after the other on the same layer (initialised once, bf16 copies added for the second), one
// result each.
// With --lora R, a LoRA step as fine-tuning runs it: the layer's weights frozen (bf16 copies made once with
// --dtype bf16), rank-R adapters (alpha 2R, B = 0 at the start, as PEFT) on every routed expert's gate, up and down
// projections, gradients and AdamW for the adapters alone; the router frozen too.
// Also, with --gemm, the expert GEMMs alone on this shape (rows = tokens·K/E per expert: up, down, dx, dh, dW), ours
// in fp32 and bf16, and the machine's peak for each ISA measured in the same run (bench_peak.h).
// Prints one JSON object per measurement (--json) or a table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/convert_bf16.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/registry.h"
#include "bench_memory.h"
#include "bench_peak.h"
#include "bench_timing.h"
#include "commands.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/threadpool.h"
#include "model/buffer.h"
#include "model/params.h"
#include "moe/moe_layer.h"
#include "offload/expert_access.h"
#include "optim/optimizer.h"

namespace {

struct Options {
  int C = 0, E = 0, F = 0, K = 0, shared_F = 0, tokens = 512, threads = 2, lora = 0, steps = 3;
  bool fp32 = true, bf16 = false, optimizer = true, gemm = false, json = false, pack = true, compare_pack = false;
};

int int_arg(const std::string& flag, const char* v, int min) {
  const int x = std::atoi(v);
  moe::check(x >= min, "bench --layer: " + flag + " must be at least " + std::to_string(min) + ", got '" + v + "'");
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--layer") continue;
    if (a == "--no-pack" || a == "--compare-pack") {
      (a == "--no-pack" ? o.pack : o.compare_pack) = a == "--compare-pack";
      continue;
    }
    if (a == "--no-optimizer" || a == "--gemm" || a == "--json") {
      (a == "--json" ? o.json : a == "--gemm" ? o.gemm : o.optimizer) = a != "--no-optimizer";
      continue;
    }
    if (i + 1 >= argc) moe::fail("bench --layer: " + a + " needs a value");
    const char* v = argv[++i];
    if (a == "--C") o.C = int_arg(a, v, 1);
    else if (a == "--E") o.E = int_arg(a, v, 1);
    else if (a == "--F") o.F = int_arg(a, v, 1);
    else if (a == "--K") o.K = int_arg(a, v, 1);
    else if (a == "--shared-F") o.shared_F = int_arg(a, v, 0);
    else if (a == "--tokens") o.tokens = int_arg(a, v, 1);
    else if (a == "--threads") o.threads = int_arg(a, v, 1);
    else if (a == "--lora") o.lora = int_arg(a, v, 1);
    else if (a == "--steps") o.steps = int_arg(a, v, 1);
    else if (a == "--dtype") {
      const std::string d = v;
      moe::check(d == "fp32" || d == "bf16" || d == "fp32,bf16",
                 "bench --layer: --dtype is fp32, bf16 or fp32,bf16, got '" + d + "'");
      o.fp32 = d != "bf16";
      o.bf16 = d != "fp32";
    } else
      moe::fail("bench --layer: unknown argument '" + a +
                "' (expected --C, --E, --F, --K, --shared-F, --tokens, --dtype, --threads, --no-optimizer, --gemm, "
                "--json, --lora, --steps, --no-pack, --compare-pack)");
  }
  moe::check(o.C && o.E && o.F && o.K, "bench --layer: --C, --E, --F and --K are required");
  moe::check(o.K <= o.E, "bench --layer: --K must not exceed --E");
  moe::check(!o.compare_pack || (o.lora && o.bf16 && !o.fp32 && o.pack),
             "bench --layer: --compare-pack needs --lora R and --dtype bf16 (and no --no-pack)");
  return o;
}

// A one-layer SwiGLU MoE model's config: the layer under test is layer 0 (the attention around it is not timed).
moe::ModelConfig layer_config(const Options& o) {
  moe::ModelConfig m;
  m.family = "mixtral";
  m.vocab_size = 256;
  m.d_model = o.C;
  m.n_layers = 1;
  m.n_heads = 16;
  m.n_kv_heads = 16;
  m.head_dim = 64;
  m.expert_d_ff = o.F;
  m.d_ff = o.F;
  m.n_experts = {o.E};
  m.top_k = o.K;
  m.shared_expert_d_ff = o.shared_F;
  m.tie_embeddings = false;
  return m;
}

// The layer's weights drawn uniformly with each tensor's initial variance (bound std·√3) rather than init_params'
// normal draws: a bench needs random values of the right scale, and a layer's billion normal draws take as long as
// its timed steps.
void fill_weights(const moe::ParamLayout& layout, float* arena, int threads) {
  moe::ThreadPool tp(threads);
  for (const moe::ParamTensor& t : layout.tensors()) {
    const float bound = t.init_bound > 0 ? t.init_bound : t.init_std * std::sqrt(3.0f);
    float* p = arena + t.offset;
    const uint64_t stream = t.offset;
    tp.parallel_for(static_cast<int64_t>(t.numel), [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i)
        p[i] = t.init_one ? 1.0f : bound * (2.0f * moe::random_uniform(1, stream, uint64_t(i)) - 1.0f);
    }, 1 << 16);
  }
}

struct LayerBench {
  Options o;
  moe::ModelConfig cfg;
  moe::ParamLayout layout;
  std::unique_ptr<moe::Backend> be;
  moe::DeviceBuffer params, grads, m, v, x, y, dy, dx;
  moe::KeptBf16Buffer params16;
  moe::ModelParams p, g;
  std::vector<const moe::ParamTensor*> trained;  // the MoE layer's tensors, which AdamW updates
  std::vector<std::pair<size_t, size_t>> bf16_ranges;  // the trained weights' bf16 copies
  // The trained tensors' gradients as maximal contiguous [offset, count) blocks, cleared as a model clears its
  // gradients (one block each, not tensor by tensor).
  std::vector<std::pair<size_t, size_t>> grad_blocks;
  bool bf16_written = false;                            // by the last optimizer step
  moe::BackwardScratch scratch;
  std::unique_ptr<moe::MoeLayer> layer;
  std::unique_ptr<moe::ResidentExpertAccess> access;
  // --lora: the adapters' values, gradients and moments (one arena each), and each adapter's [offset, count).
  moe::DeviceBuffer lora_w, lora_g, lora_m, lora_v;
  std::vector<std::pair<size_t, size_t>> adapters;

  explicit LayerBench(const Options& opt) : o(opt), cfg(layer_config(opt)), layout(cfg) {
    moe::BackendOptions bo;
    bo.threads = o.threads, bo.pack_bf16_weights = o.pack;
    be = moe::make_backend("cpu", bo);
    params.reserve(*be, layout.total() * sizeof(float));
    grads.reserve(*be, layout.total() * sizeof(float));
    if (o.optimizer && !o.lora) {  // the moments exist only where AdamW runs on the layer (Mixtral's are 11 GB)
      m.reserve(*be, layout.total() * sizeof(float));
      v.reserve(*be, layout.total() * sizeof(float));
    }
    fill_weights(layout, params.f(), o.threads);
    p = layout.bind(params.f());
    g = layout.bind(grads.f());
    for (const moe::ParamTensor& t : layout.tensors())
      if (t.name.rfind("layers.0.moe.", 0) == 0) trained.push_back(&t);
    for (const moe::ParamTensor* t : trained) {
      if (!grad_blocks.empty() && grad_blocks.back().first + grad_blocks.back().second == t->offset)
        grad_blocks.back().second += t->numel;
      else grad_blocks.emplace_back(t->offset, t->numel);
    }
    if (o.lora) attach_lora();
    layer = std::make_unique<moe::MoeLayer>(moe::MoeShape::from_config(cfg, 0), 0);
    layer->reserve(*be, o.tokens, scratch);
    access = std::make_unique<moe::ResidentExpertAccess>(p, g);
    const size_t NC = static_cast<size_t>(o.tokens) * o.C;
    for (moe::DeviceBuffer* b : {&x, &y, &dy, &dx}) b->reserve(*be, NC * sizeof(float));
    for (size_t i = 0; i < NC; ++i) {
      x.f()[i] = 2.0f * moe::random_uniform(3, 1, i) - 1.0f;
      dy.f()[i] = (2.0f * moe::random_uniform(3, 2, i) - 1.0f) * 1e-3f;
    }
  }

  // The experts' and shared experts' weights get bf16 copies, as the model gives them in bf16 compute (made once
  // when they are frozen, else refreshed by every forward).
  void bind_bf16() {
    params16.reserve(*be, layout.total());
    auto mirror = [&](const float* w) { return w ? params16.u16() + (w - params.f()) : nullptr; };
    auto& l = p.layers[0];
    l.shared.w_in_bf16 = mirror(l.shared.w_in), l.shared.w_out_bf16 = mirror(l.shared.w_out);
    for (moe::FfnParams& f : l.experts) f.w_in_bf16 = mirror(f.w_in), f.w_out_bf16 = mirror(f.w_out);
    for (const moe::ParamTensor* t : trained)
      if (t->shape.size() == 2 && t->name.find(".router.") == std::string::npos) bf16_ranges.emplace_back(t->offset, t->numel);
    if (!o.lora) return;
    // Frozen: copied once and kept by the backend, as the model keeps a frozen base's.
    for (auto [off, n] : bf16_ranges) {
      params16.keep(off, n);
      be->to_bf16(params16.u16() + off, params.f() + off, static_cast<int64_t>(n));
    }
    bf16_ranges.clear();
  }

  // Rank-r adapters on every routed expert (gate and up of the fused in-projection, and down); the layer's own
  // weights freeze: no gradient pointers.
  void attach_lora() {
    const int r = o.lora, C = o.C, F = o.F;
    size_t total = 0;
    for (int e = 0; e < o.E; ++e)
      for (auto [in, out] : {std::pair{C, F}, std::pair{C, F}, std::pair{F, C}}) {
        adapters.emplace_back(total, size_t(r) * in), total += size_t(r) * in;   // A [r, in]
        adapters.emplace_back(total, size_t(out) * r), total += size_t(out) * r;  // B [out, r]
      }
    for (moe::DeviceBuffer* b : {&lora_w, &lora_g, &lora_m, &lora_v}) {
      b->reserve(*be, total * sizeof(float));
      be->zero(b->f(), total * sizeof(float));
    }
    for (size_t i = 0; i < adapters.size(); i += 2) {  // A uniform in ±1/sqrt(in), B zero
      const auto [at, n] = adapters[i];
      const float bound = 1.0f / std::sqrt(float(n / r));
      for (size_t j = 0; j < n; ++j) lora_w.f()[at + j] = bound * (2.0f * moe::random_uniform(5, i, j) - 1.0f);
    }
    auto& lp = p.layers[0];
    auto& lg = g.layers[0];
    lg.router_w = lg.router_b = nullptr;
    lg.shared.w_in = lg.shared.w_out = lg.shared.b_in = lg.shared.b_out = nullptr;
    size_t k = 0;
    for (int e = 0; e < o.E; ++e) {
      moe::LoraParams* wp[3] = {&lp.experts[e].lora_in[0], &lp.experts[e].lora_in[1], &lp.experts[e].lora_out};
      moe::LoraParams* gp[3] = {&lg.experts[e].lora_in[0], &lg.experts[e].lora_in[1], &lg.experts[e].lora_out};
      for (int j = 0; j < 3; ++j, k += 2) {
        *wp[j] = {lora_w.f() + adapters[k].first, lora_w.f() + adapters[k + 1].first, r, 2.0f, adapters[k].first,
                  nullptr};
        *gp[j] = {lora_g.f() + adapters[k].first, lora_g.f() + adapters[k + 1].first, r, 2.0f, adapters[k].first,
                  nullptr};
      }
      moe::FfnParams& ge = lg.experts[e];
      ge.w_in = ge.w_out = ge.b_in = ge.b_out = nullptr;
    }
  }

  void zero_grads() {
    if (o.lora) return be->zero(lora_g.f(), lora_g.bytes());
    for (auto [off, n] : grad_blocks) be->zero(grads.f() + off, n * sizeof(float));
  }
  void forward() {
    if (!bf16_written)
      for (auto [off, n] : bf16_ranges) be->to_bf16(params16.u16() + off, params.f() + off, static_cast<int64_t>(n));
    bf16_written = false;
    layer->forward(*be, p.layers[0], *access, y.f(), x.f(), o.tokens);
  }
  void backward() {
    be->zero(dx.f(), dx.bytes());
    layer->backward(*be, p.layers[0], g.layers[0], *access, dx.f(), dy.f(), x.f(), o.tokens, 0.01f, 0.0f, scratch);
  }
  void optimizer_step(int t) {
    moe::TrainConfig hp;
    if (o.lora) {
      for (auto [at, n] : adapters)
        be->adamw_update(lora_w.f() + at, lora_g.f() + at, lora_m.f() + at, lora_v.f() + at, static_cast<int64_t>(n),
                         moe::adamw_params(t, 1e-4, hp, 1.0, false));
      return;
    }
    // As the model's optimizer: the bf16 copies written with the update, leaving forward nothing to convert.
    for (const moe::ParamTensor* pt : trained) {
      float* w = params.f() + pt->offset;
      const float* gw = grads.f() + pt->offset;
      const auto hpt = moe::adamw_params(t, 1e-5, hp, 1.0, pt->decay);
      const int64_t n = static_cast<int64_t>(pt->numel);
      if (std::any_of(bf16_ranges.begin(), bf16_ranges.end(), [&](auto r) { return r.first == pt->offset; }))
        be->adamw_update_bf16(w, gw, m.f() + pt->offset, v.f() + pt->offset, params16.u16() + pt->offset, n, hpt);
      else be->adamw_update(w, gw, m.f() + pt->offset, v.f() + pt->offset, n, hpt);
    }
    bf16_written = !bf16_ranges.empty();
  }
};

double sum_numel(const std::vector<const moe::ParamTensor*>& ts) {
  double n = 0;
  for (const moe::ParamTensor* t : ts) n += static_cast<double>(t->numel);
  return n;
}

struct StepTimes {
  double forward, backward, optimizer, total;
};

StepTimes timed_step(const Options& o, LayerBench& b, int& t) {
  const auto t0 = bench::Clock::now();
  b.zero_grads();
  b.forward();
  const double tf = bench::seconds_since(t0);
  b.backward();
  const double tb = bench::seconds_since(t0) - tf;
  if (o.optimizer) b.optimizer_step(++t);
  const double all = bench::seconds_since(t0);
  return {tf, tb, all - tf - tb, all};
}

// One dtype's steps on the bench's layer: a warm-up, then the median of o.steps timed steps.
void measure(const Options& o, LayerBench& b, bool bf16, int& t) {
  std::vector<double> fwd, bwd, opt, total;
  timed_step(o, b, t);  // warm-up: first touches of every buffer
  for (int i = 0; i < o.steps; ++i) {
    const StepTimes st = timed_step(o, b, t);
    fwd.push_back(st.forward), bwd.push_back(st.backward), opt.push_back(st.optimizer), total.push_back(st.total);
  }
  const double s = bench::median(total);
  double params = sum_numel(b.trained);
  if (o.lora) {
    params = 0;
    for (auto [at, n] : b.adapters) params += static_cast<double>(n);
  }
  // Expert FLOPs: forward 3 GEMMs of 2·C·F per routed slot (plus the shared experts per token), backward twice that
  // (once with frozen weights: the input gradient only; the adapters' own products are left out).
  const double passes = o.lora ? 2.0 : 3.0;
  const double flops =
      passes * 2.0 * 3.0 * o.C * (static_cast<double>(o.tokens) * o.K * o.F + double(o.tokens) * o.shared_F);
  if (o.json)
    std::printf("{\"bench\":\"moe_layer\",\"C\":%d,\"E\":%d,\"F\":%d,\"K\":%d,\"shared_F\":%d,\"tokens\":%d,"
                "\"dtype\":\"%s\",\"lora\":%d,\"threads\":%d,\"optimizer\":%s,\"params\":%.0f,\"seconds\":%.6g,\"forward_s\":%.6g,"
                "\"backward_s\":%.6g,\"optimizer_s\":%.6g,\"tokens_per_s\":%.6g,\"expert_gflops\":%.2f}\n",
                o.C, o.E, o.F, o.K, o.shared_F, o.tokens, bf16 ? "bf16" : "fp32", o.lora, o.threads,
                o.optimizer ? "true" : "false", params, s, bench::median(fwd), bench::median(bwd), bench::median(opt),
                o.tokens / s, flops / s / 1e9);
  else
    std::printf("moe layer C=%d E=%d F=%d K=%d shared_F=%d tokens=%d %s%s: %.1f ms/step (fwd %.1f, bwd %.1f, opt %.1f), "
                "%.0f tokens/s, experts %.1f GFLOP/s\n",
                o.C, o.E, o.F, o.K, o.shared_F, o.tokens, bf16 ? "bf16" : "fp32",
                o.lora ? (" lora r=" + std::to_string(o.lora)).c_str() : "", s * 1e3, bench::median(fwd) * 1e3,
                bench::median(bwd) * 1e3, bench::median(opt) * 1e3, o.tokens / s, flops / s / 1e9);
  std::fflush(stdout);
}

// --compare-pack: the bf16 LoRA step with the frozen weights kept packed against packing them in every call, on
// two copies of the layer in one process, their steps alternating (the order swapped each round) so that both
// see the same machine; the median of the per-round ratios.
void compare_pack(const Options& o) {
  Options unpacked = o;
  unpacked.pack = false;
  LayerBench a(o), b(unpacked);
  a.bind_bf16(), b.bind_bf16();
  int ta = 0, tb = 0;
  timed_step(o, a, ta), timed_step(o, b, tb);
  std::vector<double> ratio, fwd_ratio, ts_a, ts_b;
  for (int i = 0; i < o.steps; ++i) {
    StepTimes sa, sb;
    if (i % 2) sb = timed_step(o, b, tb), sa = timed_step(o, a, ta);
    else sa = timed_step(o, a, ta), sb = timed_step(o, b, tb);
    ratio.push_back(sb.total / sa.total), fwd_ratio.push_back(sb.forward / sa.forward);
    ts_a.push_back(sa.total), ts_b.push_back(sb.total);
  }
  std::printf("{\"bench\":\"pack_ab\",\"C\":%d,\"E\":%d,\"F\":%d,\"K\":%d,\"tokens\":%d,\"lora\":%d,\"threads\":%d,"
              "\"steps\":%d,\"kept_s\":%.6g,\"per_call_s\":%.6g,\"speedup\":%.4f,\"forward_speedup\":%.4f,"
              "\"kept_bytes\":%lld,\"bf16_kernel\":\"%s\"}\n",
              o.C, o.E, o.F, o.K, o.tokens, o.lora, o.threads, o.steps, bench::median(ts_a), bench::median(ts_b),
              bench::median(ratio), bench::median(fwd_ratio), static_cast<long long>(a.be->kept_bf16_bytes()),
              moe::cpu::sgemm_bf16_isa());
  std::fflush(stdout);
}

void bench_step(const Options& o) {
  if (o.compare_pack) return compare_pack(o);
  LayerBench b(o);
  int t = 0;
  if (o.fp32) measure(o, b, false, t);
  if (o.bf16) {
    b.bind_bf16();
    measure(o, b, true, t);
  }
}

// The GEMMs of one expert with R rows on this shape: up (gate and up fused, 2F wide), down, and their backward.
void bench_gemms(const Options& o) {
  moe::ThreadPool tp(o.threads);
  const int R = std::max(1, o.tokens * o.K / o.E), C = o.C, F2 = 2 * o.F, F = o.F;
  struct Case {
    const char* op;
    bool ta, tb;
    int M, N, K;
    bool b_weight;
  };
  const std::vector<Case> cases{{"up", false, true, R, F2, C, true},   {"down", false, true, R, C, F, true},
                                {"dx", false, false, R, C, F2, true},  {"dh", false, false, R, F, C, true},
                                {"dw_up", true, false, F2, C, R, false}, {"dw_down", true, false, C, F, R, false}};
  const bench::Peak peak = bench::measure_peak(tp);
  std::printf("{\"bench\":\"peak\",\"threads\":%d,\"fp32_isa\":\"%s\",\"fp32_gflops\":%.2f,\"bf16_isa\":\"%s\","
              "\"bf16_gflops\":%.2f,\"bf16_kernel\":\"%s\"}\n",
              o.threads, peak.fp32_isa, peak.fp32_gflops, peak.bf16_isa, peak.bf16_gflops, moe::cpu::sgemm_bf16_isa());
  for (const Case& c : cases) {
    const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
    const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
    // Operands on the engine's host memory, as training holds weights and activations.
    const bench::HostArray<float> A = bench::random_floats(tp, a_rows * a_cols, 1),
                                  B = bench::random_floats(tp, b_rows * b_cols, 2), out(int64_t(c.M) * c.N);
    bench::HostArray<uint16_t> B16(B.size());
    moe::cpu::to_bf16(tp, B16.data(), B.data(), int64_t(B.size()));
    const double t32 = bench::time_median([&] {
      moe::cpu::sgemm(tp, c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), int(a_cols), B.data(), int(b_cols), 0.0f,
                      out.data(), c.N);
    });
    const double t16 = bench::time_median([&] {
      if (c.b_weight)
        moe::cpu::sgemm_bf16(tp, c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), int(a_cols), B16.data(), int(b_cols), 0.0f,
                             out.data(), c.N);
      else
        moe::cpu::sgemm_bf16(tp, c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), int(a_cols), B.data(), int(b_cols), 0.0f,
                             out.data(), c.N);
    });
    const double flops = 2.0 * c.M * c.N * c.K;
    std::printf("{\"bench\":\"expert_gemm\",\"op\":\"%s\",\"C\":%d,\"E\":%d,\"F\":%d,\"K\":%d,\"tokens\":%d,"
                "\"trans_a\":%d,\"trans_b\":%d,\"M\":%d,\"N\":%d,\"Kdim\":%d,\"fp32_gflops\":%.2f,\"bf16_gflops\":%.2f,"
                "\"fp32_peak_frac\":%.3f,\"bf16_peak_frac\":%.3f}\n",
                c.op, o.C, o.E, o.F, o.K, o.tokens, int(c.ta), int(c.tb), c.M, c.N, c.K, flops / t32 / 1e9,
                flops / t16 / 1e9, flops / t32 / 1e9 / peak.fp32_gflops, flops / t16 / 1e9 / peak.bf16_gflops);
    std::fflush(stdout);
  }
}

}  // namespace

int cmd_bench_layer(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.gemm) bench_gemms(o);
  else bench_step(o);
  return 0;
}
