// moe-engine-dev bench --backend NAME --gemm: the linear layer's GEMM through a registered backend (its own
// kernels, on its own device memory) on expert-shaped problems, fp32 and bf16 weights, GFLOP/s as the median of
// repeated calls after a warm-up. Each call returns with its result ready (the backend contract), so the times
// are wall times of whole calls. A grouped shape (E experts) is one layer's expert GEMM: E segments of T rows with
// a weight each, as one grouped_matmul_forward call and as E matmul calls.
//   --shapes T×I×O,E×T×I×O,...  tokens × in × out, or experts × tokens per expert × in × out (default: two
//                       square-ish ones, OLMoE's and Qwen3-30B-A3B's expert up and down projections at their
//                       typical tokens per expert, then those layers' grouped GEMMs)
//   --library own|cublas  the GEMMs the cuda backend's linear layers run (BackendOptions::gemm; default own)
//   --json              one JSON object per shape
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "bench_timing.h"
#include "commands.h"
#include "core/error.h"
#include "core/rng.h"

namespace {

struct Shape {
  std::string name;
  int tokens, in, out;
  int experts = 1;  // > 1: a grouped GEMM of `experts` segments of `tokens` rows
};

std::vector<Shape> default_shapes() {
  return {{"2048x2048x1024", 2048, 2048, 1024},    {"4096x2048x1024", 4096, 2048, 1024},
          {"olmoe_up", 512, 2048, 2048},            {"olmoe_down", 512, 1024, 2048},
          {"qwen3_up", 256, 2048, 1536},            {"qwen3_down", 256, 768, 2048},
          {"olmoe_up_grouped", 128, 2048, 2048, 64}, {"olmoe_down_grouped", 128, 1024, 2048, 64},
          {"qwen3_up_grouped", 64, 2048, 1536, 128}, {"qwen3_down_grouped", 64, 768, 2048, 128}};
}

std::vector<Shape> parse_shapes(const std::string& list) {
  std::vector<Shape> out;
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string s = list.substr(at, end - at);
    Shape sh{s, 0, 0, 0};
    int a = 0, b = 0, c = 0, d = 0;
    const int n = std::sscanf(s.c_str(), "%dx%dx%dx%d", &a, &b, &c, &d);
    if (n == 3) sh.tokens = a, sh.in = b, sh.out = c;
    if (n == 4) sh.experts = a, sh.tokens = b, sh.in = c, sh.out = d;
    moe::check((n == 3 || n == 4) && sh.experts > 0 && sh.tokens > 0 && sh.in > 0 && sh.out > 0,
               "bench: --shapes wants T×I×O or E×T×I×O items like 512x2048x1024, got '" + s + "'");
    out.push_back(sh);
    at = end + 1;
  }
  return out;
}

// A device buffer of the backend, filled from the host with uniform values in [-1, 1).
struct Buffer {
  moe::Backend& be;
  void* p;
  Buffer(moe::Backend& b, size_t bytes) : be(b), p(b.alloc(moe::MemKind::Device, bytes)) {}
  ~Buffer() { be.release(moe::MemKind::Device, p); }
  float* f() const { return static_cast<float*>(p); }
  void fill(size_t n, uint64_t stream) {
    std::vector<float> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = 2.0f * moe::random_uniform(7, stream, i) - 1.0f;
    be.copy(p, h.data(), n * sizeof(float));
  }
};

void bench_shape(moe::Backend& be, const std::string& library, const Shape& s, bool json) {
  const size_t nx = (size_t)s.tokens * s.in, nw = (size_t)s.out * s.in, ny = (size_t)s.tokens * s.out;
  Buffer x(be, nx * 4), w(be, nw * 4), wb(be, nw * 2), y(be, ny * 4);
  x.fill(nx, 1);
  w.fill(nw, 2);
  be.to_bf16(static_cast<uint16_t*>(wb.p), w.f(), (int64_t)nw);
  const double flops = 2.0 * s.tokens * (double)s.in * s.out;
  const double fp32 = flops / bench::time_median([&] {
    be.matmul_forward(y.f(), x.f(), w.f(), nullptr, s.tokens, s.in, s.out);
  }) / 1e9;
  const double bf16 = flops / bench::time_median([&] {
    be.matmul_forward_bf16(y.f(), x.f(), static_cast<const uint16_t*>(wb.p), nullptr, s.tokens, s.in, s.out);
  }) / 1e9;
  if (json)
    std::printf("{\"bench\":\"backend_gemm\",\"backend\":\"%s\",\"library\":\"%s\",\"shape\":\"%s\",\"tokens\":%d,"
                "\"in\":%d,\"out\":%d,"
                "\"fp32_gflops\":%.6g,\"bf16_gflops\":%.6g}\n",
                be.name().c_str(), library.c_str(), s.name.c_str(), s.tokens, s.in, s.out, fp32, bf16);
  else
    std::printf("%-16s %5d x %5d x %5d   fp32 %9.1f GFLOP/s   bf16 %9.1f GFLOP/s\n", s.name.c_str(), s.tokens, s.in,
                s.out, fp32, bf16);
  std::fflush(stdout);
}

// E experts' segments of T rows, each with its own weight: one grouped call against E plain calls.
void bench_grouped(moe::Backend& be, const std::string& library, const Shape& s, bool json) {
  const int E = s.experts, T = s.tokens;
  const size_t nx = (size_t)E * T * s.in, nw = (size_t)s.out * s.in, ny = (size_t)E * T * s.out;
  Buffer x(be, nx * 4), y(be, ny * 4);
  x.fill(nx, 1);
  std::vector<std::unique_ptr<Buffer>> w, wb;
  moe::LinearGroups fp32, bf16;
  for (int e = 0; e < E; ++e) {
    w.push_back(std::make_unique<Buffer>(be, nw * 4));
    wb.push_back(std::make_unique<Buffer>(be, nw * 2));
    w.back()->fill(nw, 2 + e);
    auto* w16 = static_cast<uint16_t*>(wb.back()->p);
    be.to_bf16(w16, w.back()->f(), (int64_t)nw);
    fp32.add((int64_t)e * T, T, w.back()->f(), nullptr, nullptr);
    bf16.add((int64_t)e * T, T, w.back()->f(), w16, nullptr);
  }
  const double flops = 2.0 * E * T * (double)s.in * s.out;
  auto gflops = [&](const std::function<void()>& f) { return flops / bench::time_median(f) / 1e9; };
  auto loop = [&](const moe::LinearGroups& g) {
    for (int e = 0; e < E; ++e) {
      float* ye = y.f() + g.row0[e] * s.out;
      const float* xe = x.f() + g.row0[e] * s.in;
      if (g.w_bf16[e]) be.matmul_forward_bf16(ye, xe, g.w_bf16[e], nullptr, T, s.in, s.out);
      else be.matmul_forward(ye, xe, g.w[e], nullptr, T, s.in, s.out);
    }
  };
  const double fp32_grouped = gflops([&] { be.grouped_matmul_forward(y.f(), x.f(), fp32, s.in, s.out); });
  const double bf16_grouped = gflops([&] { be.grouped_matmul_forward(y.f(), x.f(), bf16, s.in, s.out); });
  const double fp32_loop = gflops([&] { loop(fp32); }), bf16_loop = gflops([&] { loop(bf16); });
  if (json)
    std::printf("{\"bench\":\"backend_grouped_gemm\",\"backend\":\"%s\",\"library\":\"%s\",\"shape\":\"%s\","
                "\"experts\":%d,"
                "\"tokens\":%d,\"in\":%d,\"out\":%d,\"fp32_gflops\":%.6g,\"bf16_gflops\":%.6g,"
                "\"fp32_loop_gflops\":%.6g,\"bf16_loop_gflops\":%.6g}\n",
                be.name().c_str(), library.c_str(), s.name.c_str(), E, T, s.in, s.out, fp32_grouped, bf16_grouped,
                fp32_loop, bf16_loop);
  else
    std::printf("%-18s %3d x %4d x %5d x %5d   grouped fp32 %8.1f bf16 %8.1f   per expert fp32 %8.1f bf16 %8.1f "
                "GFLOP/s\n",
                s.name.c_str(), E, T, s.in, s.out, fp32_grouped, bf16_grouped, fp32_loop, bf16_loop);
  std::fflush(stdout);
}

}  // namespace

int cmd_bench_backend(int argc, char** argv) {
  try {
    std::string backend, shapes, library = "own";
    bool json = false, gemm = false;
    int threads = 2;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--backend" && i + 1 < argc) backend = argv[++i];
      else if (a == "--shapes" && i + 1 < argc) shapes = argv[++i];
      else if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
      else if (a == "--library" && i + 1 < argc) library = argv[++i];
      else if (a == "--gemm") gemm = true;
      else if (a == "--json") json = true;
      else
        moe::fail("bench --backend: unknown argument '" + a +
                  "' (expected --gemm, --shapes, --threads, --library, --json)");
    }
    moe::check(gemm, "bench --backend: only --gemm is measured through a backend");
    moe::BackendOptions o;
    o.threads = threads;
    o.gemm = library;
    auto be = moe::make_backend(backend, o);
    if (!json) std::printf("%s\n", be->describe().c_str());
    for (const Shape& s : shapes.empty() ? default_shapes() : parse_shapes(shapes)) {
      if (s.experts > 1) bench_grouped(*be, library, s, json);
      else bench_shape(*be, library, s, json);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe-engine-dev bench: %s\n", e.what());
    return 2;
  }
}
