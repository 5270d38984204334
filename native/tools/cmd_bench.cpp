// `moe-engine-dev bench`: micro-benchmarks of the CPU kernels the training step leans on.
//   --gemm    sgemm GFLOP/s on the expert-FFN shapes (forward up/down, backward dx/dW), median of reps
//   --adamw   fused AdamW parameters/s on one 50M-parameter tensor, and the same seven memory streams (read p, g,
//             m, v; write p, m, v) with no Adam arithmetic: the ceiling this machine's memory puts on any AdamW
//   --stream  STREAM triad bytes/s (a = b + s·c, arrays far larger than the caches), best of reps
//   --threads N (default 2), --json (one JSON object per line instead of a table)
// With none of --gemm/--adamw/--stream, all three run. The FMA peak (register-only loop) is always printed.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/adamw.h"
#include "backend/cpu/gemm.h"
#include "bench_memory.h"
#include "bench_peak.h"
#include "bench_timing.h"
#include "commands.h"
#include "core/error.h"
#include "core/threadpool.h"

namespace {

using bench::Clock;
using bench::fill_random;
using FloatArray = bench::HostArray<float>;
using bench::median;
using bench::seconds_since;
using bench::time_median;

struct Options {
  int threads = 2;
  bool gemm = false, adamw = false, stream = false, json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
      moe::check(o.threads >= 1, "bench: --threads must be at least 1, got '" + std::string(argv[i]) + "'");
    } else if (a == "--gemm") {
      o.gemm = true;
    } else if (a == "--adamw") {
      o.adamw = true;
    } else if (a == "--stream") {
      o.stream = true;
    } else if (a == "--json") {
      o.json = true;
    } else {
      moe::fail("bench: unknown argument '" + a + "' (expected --threads N, --gemm, --adamw, --stream, --json)");
    }
  }
  if (!o.gemm && !o.adamw && !o.stream) o.gemm = o.adamw = o.stream = true;
  return o;
}

// ---- FMA peak: independent FMA chains that never touch memory ----

// ---- sgemm on the expert-FFN shapes ----

struct GemmCase {
  const char* op;  // up: x·W1ᵀ, down: h·W2ᵀ, dx: dy·W1, dh: dy·W2, dw_up: dyᵀ·x, dw_down: dyᵀ·h
  int T, C, F;
  bool ta, tb;
  int M, N, K;
};

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  for (int T : {64, 256, 1024, 4096})
    for (auto [C, F] : {std::pair{512, 2048}, std::pair{1024, 4096}}) {
      cases.push_back({"up", T, C, F, false, true, T, F, C});
      cases.push_back({"down", T, C, F, false, true, T, C, F});
      cases.push_back({"dx", T, C, F, false, false, T, C, F});
      cases.push_back({"dh", T, C, F, false, false, T, F, C});
      cases.push_back({"dw_up", T, C, F, true, false, F, C, T});
      cases.push_back({"dw_down", T, C, F, true, false, C, F, T});
    }
  return cases;
}

void bench_gemm(moe::ThreadPool& tp, const Options& o) {
  if (!o.json) std::printf("%-8s %5s %5s %5s  %-6s %6s %6s %6s  %9s\n", "op", "T", "C", "F", "trans", "M", "N", "K", "GFLOP/s");
  for (const GemmCase& c : gemm_cases()) {
    const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
    const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
    FloatArray A(a_rows * a_cols), B(b_rows * b_cols), Cm(int64_t(c.M) * c.N);
    fill_random(tp, A.data(), a_rows * a_cols, 1, 1.0f);
    fill_random(tp, B.data(), b_rows * b_cols, 2, 1.0f);
    const double t = time_median([&] {
      moe::cpu::sgemm(tp, c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), int(a_cols), B.data(), int(b_cols), 0.0f, Cm.data(), c.N);
    });
    const double gflops = 2.0 * c.M * c.N * c.K / t / 1e9;
    const char* trans = c.ta ? "T,N" : c.tb ? "N,T" : "N,N";
    if (o.json)
      std::printf("{\"bench\":\"gemm\",\"op\":\"%s\",\"T\":%d,\"C\":%d,\"F\":%d,\"trans_a\":%d,\"trans_b\":%d,\"M\":%d,"
                  "\"N\":%d,\"K\":%d,\"seconds\":%.6g,\"gflops\":%.2f}\n",
                  c.op, c.T, c.C, c.F, int(c.ta), int(c.tb), c.M, c.N, c.K, t, gflops);
    else
      std::printf("%-8s %5d %5d %5d  %-6s %6d %6d %6d  %9.1f\n", c.op, c.T, c.C, c.F, trans, c.M, c.N, c.K, gflops);
    std::fflush(stdout);
  }
}

// ---- AdamW on one 50M-parameter tensor ----

// AdamW's memory traffic without its arithmetic: what the loop would reach if the arithmetic were free.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adamw_streams(float* p, const float* g, float* m,
                                                                                 float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float mi = m[i] + g[i], vi = v[i] + g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] += mi * vi;
  }
}

void bench_adamw(moe::ThreadPool& tp, const Options& o) {
  const int64_t n = 50'000'000;
  FloatArray p(n), g(n), m(n), v(n);
  fill_random(tp, p.data(), n, 3, 1.0f);
  fill_random(tp, g.data(), n, 4, 0.01f);
  fill_random(tp, m.data(), n, 5, 0.001f);
  fill_random(tp, v.data(), n, 6, 1e-6f);
  moe::AdamWParams hp;
  hp.weight_decay = 0.01f;
  std::vector<double> t;
  for (int step = 1; step <= 11; ++step) {
    hp.step = step;
    auto t0 = Clock::now();
    moe::cpu::adamw_update(tp, p.data(), g.data(), m.data(), v.data(), n, hp);
    if (step > 1) t.push_back(seconds_since(t0));
  }
  const double s = median(t);
  t.clear();
  for (int rep = 0; rep < 10; ++rep) {
    auto t0 = Clock::now();
    tp.parallel_for(
        n, [&](int64_t b, int64_t e, int) { adamw_streams(p.data() + b, g.data() + b, m.data() + b, v.data() + b, e - b); },
        16);
    t.push_back(seconds_since(t0));
  }
  const double streams = median(t);
  if (o.json) {
    std::printf("{\"bench\":\"adamw\",\"params\":%lld,\"seconds\":%.6g,\"params_per_s\":%.6g}\n", (long long)n, s, n / s);
    std::printf("{\"bench\":\"adamw_streams\",\"params\":%lld,\"seconds\":%.6g,\"params_per_s\":%.6g}\n", (long long)n,
                streams, n / streams);
  } else {
    std::printf("adamw    %lld params  %.2f ms/step  %.3f Gparam/s\n", (long long)n, s * 1e3, n / s / 1e9);
    std::printf("streams  %lld params  %.2f ms/pass  %.3f Gparam/s (AdamW's 4 reads + 3 writes, no arithmetic)\n",
                (long long)n, streams * 1e3, n / streams / 1e9);
  }
}

// ---- STREAM triad ----

__attribute__((target_clones("avx512f", "avx2", "default"))) void triad(float* a, const float* b, const float* c,
                                                                         float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// A read-only sweep (a sum): what a one-token decode does to the weights. Four sums hide the add latency.
__attribute__((target_clones("avx512f", "avx2", "default"))) float read_sum(const float* a, int64_t n) {
  float s[16] = {};
  for (int64_t i = 0; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) s[j] += a[i + j];
  float t = 0;
  for (float x : s) t += x;
  return t;
}

void bench_stream(moe::ThreadPool& tp, const Options& o) {
  const int64_t n = int64_t(1) << 26;  // 256 MiB per array
  FloatArray a(n), b(n), c(n);
  fill_random(tp, a.data(), n, 7, 1.0f);
  fill_random(tp, b.data(), n, 8, 1.0f);
  fill_random(tp, c.data(), n, 9, 1.0f);
  double best = 1e30;
  for (int rep = 0; rep < 8; ++rep) {
    auto t0 = Clock::now();
    tp.parallel_for(n, [&](int64_t b0, int64_t e, int) { triad(a.data() + b0, b.data() + b0, c.data() + b0, 3.0f, e - b0); });
    best = std::min(best, seconds_since(t0));
  }
  const double bytes = 3.0 * sizeof(float) * n;  // STREAM convention: no write-allocate traffic counted
  // Reads alone, over all three arrays (768 MiB): the bound of a pass that only reads, as a decode step does.
  double read_best = 1e30;
  std::vector<float> sums(tp.threads());
  for (int rep = 0; rep < 8; ++rep) {
    auto t0 = Clock::now();
    tp.parallel_for(3 * n, [&](int64_t b0, int64_t e, int w) {
      for (int64_t i = b0; i < e;) {  // the three arrays in turn, as one range
        const int64_t arr = i / n, end = std::min(e, (arr + 1) * n);
        const float* base = arr == 0 ? a.data() : arr == 1 ? b.data() : c.data();
        sums[w] += read_sum(base + (i - arr * n), end - i);
        i = end;
      }
    }, 1 << 16);
    read_best = std::min(read_best, seconds_since(t0));
  }
  const double read_bytes = 3.0 * sizeof(float) * n;
  if (o.json) {
    std::printf("{\"bench\":\"stream_triad\",\"bytes\":%.0f,\"seconds\":%.6g,\"bytes_per_s\":%.6g}\n", bytes, best, bytes / best);
    std::printf("{\"bench\":\"stream_read\",\"bytes\":%.0f,\"seconds\":%.6g,\"bytes_per_s\":%.6g,\"sum\":%g}\n",
                read_bytes, read_best, read_bytes / read_best, static_cast<double>(sums[0]));
  } else {
    std::printf("stream triad  %.1f GB/s (best of 8, 3 x %lld MiB arrays)\n", bytes / best / 1e9, (long long)(n * 4 >> 20));
    std::printf("stream read   %.1f GB/s (best of 8, the same arrays read)\n", read_bytes / read_best / 1e9);
  }
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--bf16")) return cmd_bench_bf16(argc, argv);
    else if (!std::strcmp(argv[i], "--layer")) return cmd_bench_layer(argc, argv);
    else if (!std::strcmp(argv[i], "--backend")) return cmd_bench_backend(argc, argv);
  try {
    const Options o = parse(argc, argv);
    moe::ThreadPool tp(o.threads);
    const bench::Peak measured = bench::measure_peak(tp);
    const char* fma_isa = measured.fp32_isa;
    const double peak = measured.fp32_gflops;
    if (o.json)
      std::printf("{\"bench\":\"info\",\"threads\":%d,\"sgemm_isa\":\"%s\",\"fma_isa\":\"%s\",\"fma_peak_gflops\":%.2f}\n",
                  o.threads, moe::cpu::sgemm_isa(), fma_isa, peak);
    else
      std::printf("threads %d, sgemm kernels %s, FMA peak %.1f GFLOP/s (%s register-only loop)\n", o.threads,
                  moe::cpu::sgemm_isa(), peak, fma_isa);
    std::fflush(stdout);
    if (o.gemm) bench_gemm(tp, o);
    if (o.adamw) bench_adamw(tp, o);
    if (o.stream) bench_stream(tp, o);
    return 0;
  } catch (const moe::EngineError& e) {
    std::fprintf(stderr, "moe-engine-dev bench: %s\n", e.what());
    return 2;
  }
}
