// Dense ops on every backend (ops_checks.h): forward against naive double references, finite-difference gradient
// checks of every input and parameter gradient (loss = Σ r∘out for a fixed random r), accumulation (+=) semantics
// of every backward, agreement with the reference backend, and bit-identical results for 1 vs 3 threads. The
// reference runs the CPU's baseline kernels, so on an AVX-512 machine they are checked too.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/threadpool.h"
#include "ops_checks.h"
#include "testing.h"

using moe_test::random_vector;

using namespace ops_test;

namespace {

// ---------------------------------------------------------------------------------------------
// Naive double references.

DVec ref_layernorm(const Vec& x, const Vec& w, const Vec& b, int N, int C, float eps) {
  DVec out(x.size());
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    for (int c = 0; c < C; ++c) out[n * C + c] = (x[n * C + c] - m) / std::sqrt(v + eps) * w[c] + b[c];
  }
  return out;
}

DVec ref_rmsnorm(const Vec& x, const Vec& w, int N, int C, float eps) {
  DVec out(x.size());
  for (int n = 0; n < N; ++n) {
    double ms = 0;
    for (int c = 0; c < C; ++c) ms += (double)x[n * C + c] * x[n * C + c];
    double r = 1.0 / std::sqrt(ms / C + eps);
    for (int c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] * r * w[c];
  }
  return out;
}

double ref_gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// matmul

TEST(matmul_forward_matches_reference) {
  for_each_backend([&](Backend& be) {
    const int N = 37, I = 70, O = 19;
    Vec x = random_vector(N * I, 1), w = random_vector(O * I, 2), b = random_vector(O, 3), y(N * O);
    be.matmul_forward(y.data(), x.data(), w.data(), b.data(), N, I, O);
    DVec ref(N * O);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o) {
        double acc = b[o];
        for (int i = 0; i < I; ++i) acc += (double)x[n * I + i] * w[o * I + i];
        ref[n * O + o] = acc;
      }
    expect_below("matmul forward", max_err(y, ref), kForwardTol);
    be.matmul_forward(y.data(), x.data(), w.data(), nullptr, N, I, O);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o) ref[n * O + o] -= b[o];
    expect_below("matmul forward (no bias)", max_err(y, ref), kForwardTol);
  });
}

TEST(matmul_gradients) {
  for_each_backend([&](Backend& be) {
    const int N = 10, I = 8, O = 6;
    Vec x = random_vector(N * I, 1), w = random_vector(O * I, 2), b = random_vector(O, 3), r = random_vector(N * O, 4);
    Vec y(N * O), dx(N * I), dw(O * I), db(O);
    auto loss = [&] {
      be.matmul_forward(y.data(), x.data(), w.data(), b.data(), N, I, O);
      return weighted_sum(y, r);
    };
    be.matmul_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), N, I, O);
    check_grad("matmul dx", x, dx, loss, kGradTolLinear);
    check_grad("matmul dw", w, dw, loss, kGradTolLinear);
    check_grad("matmul db", b, db, loss, kGradTolLinear);
    Vec dx2 = dx, dw2 = dw, db2 = db;
    be.matmul_backward(dx2.data(), dw2.data(), db2.data(), r.data(), x.data(), w.data(), N, I, O);
    expect_doubles("matmul dx", dx, dx2);
    expect_doubles("matmul dw", dw, dw2);
    expect_doubles("matmul db", db, db2);
  });
}

TEST(matmul_matches_reference_any_threads) {
  const int N = 53, I = 40, O = 150;
  Vec x = random_vector(N * I, 1), w = random_vector(O * I, 2), b = random_vector(O, 3), dy = random_vector(N * O, 4);
  expect_consistent("matmul", [&](Backend& be) {
    Vec y(N * O), dx(N * I), dw(O * I), db(O);
    be.matmul_forward(y.data(), x.data(), w.data(), b.data(), N, I, O);
    be.matmul_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, I, O);
    return concat({&y, &dx, &dw, &db});
  });
}

// ---------------------------------------------------------------------------------------------
// matmul on bf16 weights (train.compute_dtype "bf16"): fp32 accumulation of bf16-rounded operands

TEST(matmul_bf16_forward_matches_rounded_reference) {
  for_each_backend([&](Backend& be) {
    const int N = 37, I = 70, O = 19;
    Vec x = random_vector(N * I, 1), w = random_vector(O * I, 2), b = random_vector(O, 3), y(N * O);
    std::vector<uint16_t> w16(O * I);
    be.to_bf16(w16.data(), w.data(), O * I);
    for (int i = 0; i < O * I; ++i) CHECK(w16[i] == moe::f32_to_bf16(w[i]));
    be.matmul_forward_bf16(y.data(), x.data(), w16.data(), b.data(), N, I, O);
    DVec ref(N * O);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o) {
        double acc = b[o];
        for (int i = 0; i < I; ++i)
          acc += (double)moe::bf16_to_f32(moe::f32_to_bf16(x[n * I + i])) * moe::bf16_to_f32(w16[o * I + i]);
        ref[n * O + o] = acc;
      }
    expect_below("matmul bf16 forward", max_err(y, ref), kForwardTol);
  });
}

// The AMX kernel sums in another order than the reference's vdpbf16ps sequence (same rounded operands): up to a
// few fp32 ulps of these sums, far below what an operand left unrounded would change (about 1e-3).
TEST(matmul_bf16_matches_reference_any_threads) {
  const int N = 53, I = 40, O = 150;
  Vec x = random_vector(N * I, 1), w = random_vector(O * I, 2), b = random_vector(O, 3), dy = random_vector(N * O, 4);
  expect_consistent("matmul bf16", [&](Backend& be) {
    std::vector<uint16_t> w16(O * I);
    be.to_bf16(w16.data(), w.data(), O * I);
    Vec w16f(O * I), y(N * O), dx(N * I), dw(O * I), db(O);
    for (int i = 0; i < O * I; ++i) w16f[i] = moe::bf16_to_f32(w16[i]);
    be.matmul_forward_bf16(y.data(), x.data(), w16.data(), b.data(), N, I, O);
    be.matmul_backward_bf16(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w16.data(), N, I, O);
    return concat({&w16f, &y, &dx, &dw, &db});
  }, 1e-5);
}

// ---------------------------------------------------------------------------------------------
// embedding

TEST(embedding_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int B = 2, T = 5, C = 8, V = 7;
    // Token 3 repeats, token 6 never appears (its gradient row must stay zero).
    std::vector<int32_t> tokens = {3, 1, 3, 0, 5, 2, 3, 4, 1, 0};
    Vec wte = random_vector(V * C, 1), wpe = random_vector(T * C, 2), r = random_vector(B * T * C, 3);
    Vec out(B * T * C), dwte(V * C), dwpe(T * C);
    be.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    DVec ref(out.size());
    for (int n = 0; n < B * T; ++n)
      for (int c = 0; c < C; ++c) ref[n * C + c] = (double)wte[tokens[n] * C + c] + wpe[(n % T) * C + c];
    expect_below("embedding forward", max_err(out, ref), kForwardTol);

    auto loss = [&] {
      be.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
      return weighted_sum(out, r);
    };
    be.embedding_backward(dwte.data(), dwpe.data(), r.data(), tokens.data(), B, T, C);
    check_grad("embedding dwte", wte, dwte, loss, kGradTolLinear);
    check_grad("embedding dwpe", wpe, dwpe, loss, kGradTolLinear);
    for (int c = 0; c < C; ++c) CHECK(dwte[6 * C + c] == 0.0f);
    Vec dwte2 = dwte, dwpe2 = dwpe;
    be.embedding_backward(dwte2.data(), dwpe2.data(), r.data(), tokens.data(), B, T, C);
    expect_doubles("embedding dwte", dwte, dwte2);
    expect_doubles("embedding dwpe", dwpe, dwpe2);

    Vec plain(out.size());
    be.embedding_forward(plain.data(), tokens.data(), wte.data(), nullptr, B, T, C);
    for (int n = 0; n < B * T; ++n)
      for (int c = 0; c < C; ++c) CHECK(plain[n * C + c] == wte[tokens[n] * C + c]);
  });
}

TEST(embedding_matches_reference_any_threads) {
  const int B = 3, T = 41, C = 200, V = 13;
  std::vector<int32_t> tokens(B * T);
  for (int i = 0; i < B * T; ++i) tokens[i] = (i * 7) % V;
  Vec wte = random_vector(V * C, 1), wpe = random_vector(T * C, 2), dout = random_vector(B * T * C, 3);
  expect_consistent("embedding", [&](Backend& be) {
    Vec out(B * T * C), dwte(V * C), dwpe(T * C);
    be.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    be.embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
    return concat({&out, &dwte, &dwpe});
  });
}

// ---------------------------------------------------------------------------------------------
// layernorm / rmsnorm

TEST(layernorm_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int N = 10, C = 8;
    const float eps = 1e-5f;
    Vec x = random_vector(N * C, 1), w = random_vector(C, 2), b = random_vector(C, 3), r = random_vector(N * C, 4);
    Vec out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
    be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, eps);
    expect_below("layernorm forward", max_err(out, ref_layernorm(x, w, b, N, C, eps)), kForwardTol);

    auto loss = [&] {
      be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, eps);
      return weighted_sum(out, r);
    };
    loss();
    be.layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), N, C);
    check_grad("layernorm dinp", x, dx, loss, kGradTolNonlinear);
    check_grad("layernorm dw", w, dw, loss, kGradTolLinear);
    check_grad("layernorm db", b, db, loss, kGradTolLinear);
    loss();
    Vec dx2 = dx, dw2 = dw, db2 = db;
    be.layernorm_backward(dx2.data(), dw2.data(), db2.data(), r.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), N, C);
    expect_doubles("layernorm dinp", dx, dx2);
    expect_doubles("layernorm dw", dw, dw2);
    expect_doubles("layernorm db", db, db2);
  });
}

TEST(layernorm_matches_reference_any_threads) {
  const int N = 67, C = 200;
  Vec x = random_vector(N * C, 1), w = random_vector(C, 2), b = random_vector(C, 3), dout = random_vector(N * C, 4);
  expect_consistent("layernorm", [&](Backend& be) {
    Vec out(N * C), mean(N), rstd(N), dx(N * C), dw(C), db(C);
    be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    be.layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), N, C);
    return concat({&out, &mean, &rstd, &dx, &dw, &db});
  });
}

TEST(rmsnorm_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int N = 10, C = 8;
    const float eps = 1e-6f;
    Vec x = random_vector(N * C, 1), w = random_vector(C, 2), r = random_vector(N * C, 4);
    Vec out(N * C), rstd(N), dx(N * C), dw(C);
    be.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
    expect_below("rmsnorm forward", max_err(out, ref_rmsnorm(x, w, N, C, eps)), kForwardTol);

    auto loss = [&] {
      be.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
      return weighted_sum(out, r);
    };
    loss();
    be.rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
    check_grad("rmsnorm dinp", x, dx, loss, kGradTolNonlinear);
    check_grad("rmsnorm dw", w, dw, loss, kGradTolLinear);
    loss();
    Vec dx2 = dx, dw2 = dw;
    be.rmsnorm_backward(dx2.data(), dw2.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
    expect_doubles("rmsnorm dinp", dx, dx2);
    expect_doubles("rmsnorm dw", dw, dw2);
  });
}

TEST(rmsnorm_matches_reference_any_threads) {
  const int N = 67, C = 200;
  Vec x = random_vector(N * C, 1), w = random_vector(C, 2), dout = random_vector(N * C, 4);
  expect_consistent("rmsnorm", [&](Backend& be) {
    Vec out(N * C), rstd(N), dx(N * C), dw(C);
    be.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
    be.rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    return concat({&out, &rstd, &dx, &dw});
  });
}

// ---------------------------------------------------------------------------------------------
// gelu / swiglu / elementwise

TEST(gelu_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int n = 80;
    Vec x = random_vector(n, 1, 4.0f), r = random_vector(n, 2), out(n), dx(n);
    x[0] = 0.0f;
    x[1] = -12.0f;
    x[2] = 12.0f;
    be.gelu_forward(out.data(), x.data(), n);
    DVec ref(n);
    for (int i = 0; i < n; ++i) ref[i] = ref_gelu(x[i]);
    expect_below("gelu forward", max_err(out, ref), kForwardTol);
    auto loss = [&] {
      be.gelu_forward(out.data(), x.data(), n);
      return weighted_sum(out, r);
    };
    be.gelu_backward(dx.data(), x.data(), r.data(), n);
    check_grad("gelu dinp", x, dx, loss, kGradTolNonlinear);
    Vec dx2 = dx;
    be.gelu_backward(dx2.data(), x.data(), r.data(), n);
    expect_doubles("gelu dinp", dx, dx2);
  });
}

TEST(swiglu_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int N = 10, F = 8;
    Vec gu = random_vector(N * 2 * F, 1, 3.0f), r = random_vector(N * F, 2), out(N * F), dgu(N * 2 * F);
    be.swiglu_forward(out.data(), gu.data(), N, F);
    DVec ref(N * F);
    for (int n = 0; n < N; ++n)
      for (int f = 0; f < F; ++f) {
        double g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f];
        ref[n * F + f] = g / (1.0 + std::exp(-g)) * u;
      }
    expect_below("swiglu forward", max_err(out, ref), kForwardTol);
    auto loss = [&] {
      be.swiglu_forward(out.data(), gu.data(), N, F);
      return weighted_sum(out, r);
    };
    be.swiglu_backward(dgu.data(), r.data(), gu.data(), N, F);
    check_grad("swiglu dgate_up", gu, dgu, loss, kGradTolNonlinear);
    Vec dgu2 = dgu;
    be.swiglu_backward(dgu2.data(), r.data(), gu.data(), N, F);
    expect_doubles("swiglu dgate_up", dgu, dgu2);
  });
}

// swiglu_backward_write ignores what the gradient held and writes what swiglu_backward adds onto zeros, bit for
// bit, over rows long enough for the vector kernels' body and tail.
TEST(swiglu_backward_write_equals_accumulating_onto_zeros) {
  for_each_backend([&](Backend& be) {
    const int N = 7, F = 37;
    const Vec gu = random_vector(N * 2 * F, 1, 3.0f), r = random_vector(N * F, 2);
    Vec added(N * 2 * F, 0.0f), written = random_vector(N * 2 * F, 3);
    be.swiglu_backward(added.data(), r.data(), gu.data(), N, F);
    be.swiglu_backward_write(written.data(), r.data(), gu.data(), N, F);
    CHECK_MSG(bitwise_equal(added, written), std::string("swiglu_backward_write differs on ") + be.name());
  });
}

TEST(elementwise_add_and_accumulate) {
  for_each_backend([&](Backend& be) {
    const int n = 10007;
    Vec a = random_vector(n, 1), b = random_vector(n, 2), out(n), dst = random_vector(n, 3), before = dst;
    be.add_forward(out.data(), a.data(), b.data(), n);
    be.accumulate(dst.data(), a.data(), n);
    for (int i = 0; i < n; ++i) {
      CHECK(out[i] == a[i] + b[i]);
      CHECK(dst[i] == before[i] + a[i]);
    }
  });
}

TEST(cpu_zero_clears_exactly_its_block) {
  // Blocks from 8 MiB on are cleared by every thread in 1 MiB chunks, from 64 MiB with streaming stores between
  // whole lines; odd sizes and offsets must end exactly.
  for (int threads : {1, 3}) {
    std::unique_ptr<Backend> be = moe::make_backend("cpu", {threads, "native"});
    const size_t guard = 4096;
    for (size_t bytes : {size_t(100), (size_t(8) << 20) - 4, (size_t(8) << 20) + 12345, (size_t(19) << 20) + 7,
                          (size_t(64) << 20) - 4, (size_t(70) << 20) + 5}) {
      std::vector<unsigned char> buf(bytes + 2 * guard + 3, 0xA5);
      be->zero(buf.data() + guard + 3, bytes);
      bool ok = true;
      for (size_t i = 0; i < buf.size(); ++i) {
        const bool inside = i >= guard + 3 && i < guard + 3 + bytes;
        ok &= buf[i] == (inside ? 0 : 0xA5);
      }
      CHECK_MSG(ok, "zero of " + std::to_string(bytes) + " bytes on " + std::to_string(threads) + " threads");
    }
  }
}

TEST(thread_pool_runs_a_region_started_inside_a_region) {
  // The nested call finds the pool busy and runs its chunks on the calling thread.
  moe::ThreadPool tp(2);
  std::vector<int> hits(2 * 100, 0);
  tp.parallel_for(2, [&](int64_t o0, int64_t o1, int) {
    for (int64_t o = o0; o < o1; ++o)
      tp.parallel_for(100, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) ++hits[o * 100 + i];
      });
  });
  bool once = true;
  for (int h : hits) once &= h == 1;
  CHECK(once);
}

TEST(pointwise_matches_reference_any_threads) {
  const int n = 3 * 4096 + 77, N = 67, F = 96;
  Vec x = random_vector(n, 1, 4.0f), dout = random_vector(n, 2);
  Vec gu = random_vector(N * 2 * F, 3, 3.0f), dsw = random_vector(N * F, 4);
  expect_consistent("gelu/swiglu/add", [&](Backend& be) {
    Vec g(n), dg(n), s(N * F), ds(N * 2 * F), sum(n), acc = dout;
    be.gelu_forward(g.data(), x.data(), n);
    be.gelu_backward(dg.data(), x.data(), dout.data(), n);
    be.swiglu_forward(s.data(), gu.data(), N, F);
    be.swiglu_backward(ds.data(), dsw.data(), gu.data(), N, F);
    be.add_forward(sum.data(), x.data(), dout.data(), n);
    be.accumulate(acc.data(), x.data(), n);
    return concat({&g, &dg, &s, &ds, &sum, &acc});
  });
}

// ---------------------------------------------------------------------------------------------
// crossentropy

namespace {
DVec ref_crossentropy(const Vec& logits, const std::vector<int32_t>& targets, int N, int V) {
  DVec ref(N, 0.0);
  for (int n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    double m = -1e300, s = 0;
    for (int v = 0; v < V; ++v) m = std::fmax(m, logits[n * V + v]);
    for (int v = 0; v < V; ++v) s += std::exp(logits[n * V + v] - m);
    ref[n] = m + std::log(s) - logits[n * V + targets[n]];
  }
  return ref;
}
}  // namespace

TEST(crossentropy_forward_and_gradients) {
  for_each_backend([&](Backend& be) {
    const int N = 10, V = 37;
    const float scale = 0.7f;
    Vec logits = random_vector(N * V, 1, 2.0f), losses(N), dlogits(N * V);
    std::vector<int32_t> targets = {3, 0, -1, 36, 5, -100, 7, 7, 20, 1};
    be.crossentropy_forward(losses.data(), logits.data(), targets.data(), N, V);
    expect_below("crossentropy forward", max_err(losses, ref_crossentropy(logits, targets, N, V)), kForwardTol);
    CHECK(losses[2] == 0.0f && losses[5] == 0.0f);

    auto loss = [&] {
      be.crossentropy_forward(losses.data(), logits.data(), targets.data(), N, V);
      double s = 0;
      for (float l : losses) s += scale * (double)l;
      return s;
    };
    be.crossentropy_backward(dlogits.data(), logits.data(), targets.data(), scale, N, V);
    check_grad("crossentropy dlogits", logits, dlogits, loss, kGradTolNonlinear, 1 << 20);
    for (int v = 0; v < V; ++v) CHECK(dlogits[2 * V + v] == 0.0f && dlogits[5 * V + v] == 0.0f);
    Vec d2 = dlogits;
    be.crossentropy_backward(d2.data(), logits.data(), targets.data(), scale, N, V);
    expect_doubles("crossentropy dlogits", dlogits, d2);
  });
}

TEST(crossentropy_large_logits_stable) {
  for_each_backend([&](Backend& be) {
    // exp(200) overflows float: only a max-subtracted log-sum-exp stays finite and exact.
    const int N = 3, V = 37;
    Vec logits = random_vector(N * V, 1, 5.0f), losses(N), dlogits(N * V);
    logits[3] = 200.0f;
    logits[V + 4] = -200.0f;
    for (int v = 0; v < V; ++v) logits[2 * V + v] += 150.0f;
    std::vector<int32_t> targets = {3, 4, 9};
    be.crossentropy_forward(losses.data(), logits.data(), targets.data(), N, V);
    expect_below("crossentropy forward, |logits| ~ 200", max_err(losses, ref_crossentropy(logits, targets, N, V)),
                 kForwardTol);
    be.crossentropy_backward(dlogits.data(), logits.data(), targets.data(), 1.0f, N, V);
    for (int n = 0; n < N; ++n) {
      double row = 0;
      for (int v = 0; v < V; ++v) {
        CHECK(std::isfinite(dlogits[n * V + v]));
        row += dlogits[n * V + v];
      }
      CHECK_NEAR(row, 0.0, 1e-5);  // softmax sums to one, minus the one-hot
    }
  });
}

TEST(crossentropy_matches_reference_any_threads) {
  const int N = 29, V = 1001;
  Vec logits = random_vector(N * V, 1, 5.0f);
  std::vector<int32_t> targets(N);
  for (int n = 0; n < N; ++n) targets[n] = n % 5 == 0 ? -1 : (n * 97) % V;
  expect_consistent("crossentropy", [&](Backend& be) {
    Vec losses(N), d(N * V);
    be.crossentropy_forward(losses.data(), logits.data(), targets.data(), N, V);
    be.crossentropy_backward(d.data(), logits.data(), targets.data(), 0.5f, N, V);
    return concat({&losses, &d});
  });
}

TEST_MAIN()
