// Grouped linear layers and FFN runs on every backend (ops_checks.h): Backend::grouped_matmul_* must give, bit for
// bit, what one matmul per group gives on the same backend (whatever tiles or launches it uses), leave rows outside
// every group untouched, and agree with the reference; an FFN run over several experts' segments must equal the
// experts one at a time, for every activation, with biases, LoRA adapters and bf16 weights.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "model/ffn.h"
#include "ops_checks.h"
#include "testing.h"

using moe_test::random_vector;
using namespace ops_test;

namespace {

// Groups of rows (some empty, listed out of row order, leaving a gap of rows that no group owns) with weights of
// their own, in fp32 or as bf16 copies.
struct Groups {
  int I, O;
  std::vector<int64_t> row0;
  std::vector<int> rows;
  std::vector<Vec> w, b;
  std::vector<std::vector<uint16_t>> w16;
  int64_t total_rows = 0;

  Groups(int I_, int O_, const std::vector<int>& sizes, bool bias) : I(I_), O(O_) {
    int64_t next = 3;  // rows 0..2 belong to no group
    for (size_t g = 0; g < sizes.size(); ++g) {
      row0.push_back(next);
      rows.push_back(sizes[g]);
      next += sizes[g];
      w.push_back(random_vector((size_t)O * I, 100 + g, 0.5f));
      b.push_back(bias && g % 2 == 0 ? random_vector(O, 200 + g) : Vec());
      w16.emplace_back((size_t)O * I);
      for (size_t i = 0; i < w.back().size(); ++i) w16.back()[i] = moe::f32_to_bf16(w.back()[i]);
    }
    total_rows = next + 2;  // and two rows past the last group
    // Reverse the listing: the groups' order must not matter.
    std::reverse(row0.begin(), row0.end());
    std::reverse(rows.begin(), rows.end());
    std::reverse(w.begin(), w.end());
    std::reverse(b.begin(), b.end());
    std::reverse(w16.begin(), w16.end());
  }
  int size() const { return (int)rows.size(); }
  moe::LinearGroups linear(bool bf16, std::vector<Vec>* dw = nullptr, std::vector<Vec>* db = nullptr) {
    moe::LinearGroups g;
    for (int i = 0; i < size(); ++i)
      g.add(row0[i], rows[i], w[i].data(), bf16 ? w16[i].data() : nullptr, b[i].empty() ? nullptr : b[i].data(),
            dw && i != 1 ? (*dw)[i].data() : nullptr,  // group 1 frozen
            db && !b[i].empty() ? (*db)[i].data() : nullptr);
    return g;
  }
};

// Forward then backward of the grouped op (grouped) or of one matmul per group, every output and gradient.
Vec linear_outputs(Backend& be, Groups& G, bool bf16, bool grouped) {
  const int I = G.I, O = G.O;
  const Vec x = random_vector(G.total_rows * I, 1), dy = random_vector(G.total_rows * O, 2);
  Vec y(G.total_rows * O, 7.0f), dx = random_vector(G.total_rows * I, 3);
  std::vector<Vec> dw, db;
  for (int i = 0; i < G.size(); ++i) dw.push_back(random_vector((size_t)O * I, 300 + i)), db.push_back(random_vector(O, 400 + i));
  if (grouped) {
    be.grouped_matmul_forward(y.data(), x.data(), G.linear(bf16), I, O);
    be.grouped_matmul_backward(dx.data(), dy.data(), x.data(), G.linear(bf16, &dw, &db), I, O);
  }
  for (int i = 0; i < G.size() && !grouped; ++i) {
    if (G.rows[i] == 0) continue;
    const int64_t r = G.row0[i];
    const float* b = G.b[i].empty() ? nullptr : G.b[i].data();
    float* dwi = i != 1 ? dw[i].data() : nullptr;
    float* dbi = b ? db[i].data() : nullptr;
    if (bf16) {
      be.matmul_forward_bf16(y.data() + r * O, x.data() + r * I, G.w16[i].data(), b, G.rows[i], I, O);
      be.matmul_backward_bf16(dx.data() + r * I, dwi, dbi, dy.data() + r * O, x.data() + r * I, G.w16[i].data(),
                              G.rows[i], I, O);
    } else {
      be.matmul_forward(y.data() + r * O, x.data() + r * I, G.w[i].data(), b, G.rows[i], I, O);
      be.matmul_backward(dx.data() + r * I, dwi, dbi, dy.data() + r * O, x.data() + r * I, G.w[i].data(), G.rows[i],
                         I, O);
    }
  }
  Vec all = concat({&y, &dx});
  for (int i = 0; i < G.size(); ++i) all.insert(all.end(), dw[i].begin(), dw[i].end());
  for (int i = 0; i < G.size(); ++i) all.insert(all.end(), db[i].begin(), db[i].end());
  return all;
}

// The backward with dx written (write) or with each group's dx rows cleared and then accumulated into: dx (rows
// outside every group keep what they held), the weight and bias gradients.
Vec write_dx_outputs(Backend& be, Groups& G, bool bf16, bool write) {
  const int I = G.I, O = G.O;
  const Vec x = random_vector(G.total_rows * I, 1), dy = random_vector(G.total_rows * O, 2);
  Vec dx = random_vector(G.total_rows * I, 3);
  std::vector<Vec> dw, db;
  for (int i = 0; i < G.size(); ++i) {
    dw.push_back(random_vector((size_t)O * I, 300 + i));
    db.push_back(random_vector(O, 400 + i));
  }
  if (write) {
    be.grouped_matmul_backward_write_dx(dx.data(), dy.data(), x.data(), G.linear(bf16, &dw, &db), I, O);
  } else {
    for (int i = 0; i < G.size(); ++i) std::fill_n(dx.begin() + G.row0[i] * I, (size_t)G.rows[i] * I, 0.0f);
    be.grouped_matmul_backward(dx.data(), dy.data(), x.data(), G.linear(bf16, &dw, &db), I, O);
  }
  Vec all = dx;
  for (int i = 0; i < G.size(); ++i) all.insert(all.end(), dw[i].begin(), dw[i].end());
  for (int i = 0; i < G.size(); ++i) all.insert(all.end(), db[i].begin(), db[i].end());
  return all;
}

// `tol` is against the reference, whose sums run in another order than a device's tiles: a weight gradient sums
// every row of its group, so a longer group moves it further (about sqrt(rows)·eps·|partial sums|).
void check_grouped(const std::string& what, int I, int O, const std::vector<int>& sizes, bool bias, double tol_fp32,
                   double tol_bf16) {
  for (bool bf16 : {false, true}) {
    const std::string name = what + (bf16 ? " bf16" : " fp32");
    for_each_backend([&](Backend& be) {
      Groups G(I, O, sizes, bias);
      const Vec grouped = linear_outputs(be, G, bf16, true), loop = linear_outputs(be, G, bf16, false);
      CHECK_MSG(bitwise_equal(grouped, loop), name + " on " + be.name() + ": grouped differs from one matmul per group");
      CHECK_MSG(bitwise_equal(write_dx_outputs(be, G, bf16, true), write_dx_outputs(be, G, bf16, false)),
                name + " on " + be.name() + ": writing dx differs from clearing it and accumulating");
      // Rows no group owns keep what they held.
      for (int64_t r : {int64_t(0), int64_t(2), G.total_rows - 1})
        for (int o = 0; o < O; ++o) CHECK_MSG(grouped[r * O + o] == 7.0f, name + ": a row outside every group was written");
    });
    expect_consistent(name, [&](Backend& be) {
      Groups G(I, O, sizes, bias);
      return linear_outputs(be, G, bf16, true);
    }, bf16 ? tol_bf16 : tol_fp32);
  }
}

}  // namespace

TEST(grouped_matmul_equals_one_matmul_per_group) {
  check_grouped("small groups", 37, 19, {5, 0, 17, 1, 40, 0, 9}, true, 1e-6, 1e-5);
}

// Enough rows that a device backend picks its large block tiles for the forward (and small ones for the weight
// gradients), with several tiles per group.
TEST(grouped_matmul_large_groups) {
  // Groups of 1000-1200 rows: 2.4e-5 (fp32) and 2.9e-5 (bf16) on an H200, where the small groups' are 0 and 2.4e-7.
  check_grouped("large groups", 48, 272, {1100, 0, 1031, 1200, 1099, 1000, 1150, 1111, 1087}, false, 2e-5, 2e-5);
}

namespace {

struct FfnRun {
  moe::FfnShape shape;
  std::vector<Vec> params, grads;  // per segment: w_in, b_in, w_out, b_out, 3×(A, B)
  std::vector<std::vector<uint16_t>> bf16;  // per segment: w_in, w_out copies
  moe::LoraDropout dropout;
};

// Segment i's weights and gradient pointers. Odd segments carry LoRA on every linear; bias when asked.
void bind(FfnRun& R, int i, bool bias, bool bf16, moe::FfnParams& w, moe::FfnParams& g) {
  const int r = 3;
  Vec* p = &R.params[i * 10];
  Vec* d = &R.grads[i * 10];
  w = {};
  g = {};
  w.w_in = p[0].data(), g.w_in = d[0].data();
  w.w_out = p[2].data(), g.w_out = d[2].data();
  if (bias) w.b_in = p[1].data(), g.b_in = d[1].data(), w.b_out = p[3].data(), g.b_out = d[3].data();
  if (bf16) w.w_in_bf16 = R.bf16[i * 2].data(), w.w_out_bf16 = R.bf16[i * 2 + 1].data();
  if (i % 2 == 1) {
    moe::LoraParams* lw[3] = {&w.lora_in[0], &w.lora_in[1], &w.lora_out};
    moe::LoraParams* lg[3] = {&g.lora_in[0], &g.lora_in[1], &g.lora_out};
    for (int k = 0; k < 3; ++k) {
      if (k == 1 && !R.shape.gated()) continue;  // an ungated in-projection has one part
      *lw[k] = {p[4 + 2 * k].data(), p[5 + 2 * k].data(), r, 0.7f, uint64_t(i * 10 + k), &R.dropout};
      *lg[k] = {d[4 + 2 * k].data(), d[5 + 2 * k].data(), r, 0.7f, uint64_t(i * 10 + k), &R.dropout};
    }
  }
}

FfnRun make_run(moe::FfnActivation act, const std::vector<int>& sizes) {
  FfnRun R;
  R.shape = {24, 20, act};
  R.dropout.p = 0.25f;
  R.dropout.active = true;
  R.dropout.seed = 11;
  const int C = R.shape.C, F = R.shape.F, IR = R.shape.in_rows(), r = 3;
  const size_t lengths[10] = {(size_t)IR * C, (size_t)IR, (size_t)C * F, (size_t)C, (size_t)r * C, (size_t)F * r,
                              (size_t)r * C, (size_t)F * r, (size_t)r * F, (size_t)C * r};
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int k = 0; k < 10; ++k) {
      R.params.push_back(random_vector(lengths[k], 1000 + i * 10 + k, 0.4f));
      R.grads.push_back(random_vector(lengths[k], 2000 + i * 10 + k, 0.1f));
    }
    for (int k : {0, 2}) {
      R.bf16.emplace_back(R.params[i * 10 + k].size());
      for (size_t j = 0; j < R.bf16.back().size(); ++j) R.bf16.back()[j] = moe::f32_to_bf16(R.params[i * 10 + k][j]);
    }
  }
  return R;
}

// Forward and backward of the segments, as one run (together) or one block at a time; every output and gradient.
Vec ffn_outputs(Backend& be, moe::FfnActivation act, bool bias, bool bf16, bool together) {
  const std::vector<int> sizes = {6, 0, 11, 4, 9};
  FfnRun R = make_run(act, sizes);
  const int C = R.shape.C, F = R.shape.F, IR = R.shape.in_rows();
  int64_t rows = 0;
  std::vector<moe::FfnSegment> run;
  for (size_t i = 0; i < sizes.size(); ++i) {
    moe::FfnSegment s;
    s.row0 = rows, s.rows = sizes[i];
    bind(R, (int)i, bias, bf16, s.w, s.g);
    run.push_back(s);
    rows += sizes[i];
  }
  std::reverse(run.begin(), run.end());  // backward's order
  const Vec x = random_vector(rows * C, 5), dy = random_vector(rows * C, 6);
  Vec y(rows * C), h(rows * IR), a(rows * F), dx = random_vector(rows * C, 7), dh(rows * IR), da(rows * F);
  if (together) {
    moe::ffn_forward(be, run, R.shape, y.data(), x.data(), h.data(), a.data());
    moe::ffn_backward(be, run, R.shape, dx.data(), dy.data(), x.data(), h.data(), a.data(), dh.data(), da.data());
  } else {
    for (const moe::FfnSegment& s : run) {
      const int64_t r = s.row0;
      moe::ffn_forward(be, s.w, R.shape, y.data() + r * C, x.data() + r * C, h.data() + r * IR, a.data() + r * F,
                       s.rows);
    }
    for (const moe::FfnSegment& s : run) {
      const int64_t r = s.row0;
      moe::ffn_backward(be, s.w, s.g, R.shape, dx.data() + r * C, dy.data() + r * C, x.data() + r * C,
                        h.data() + r * IR, a.data() + r * F, dh.data(), da.data(), s.rows);
    }
  }
  Vec all = concat({&y, &h, &a, &dx});
  for (const Vec& g : R.grads) all.insert(all.end(), g.begin(), g.end());
  return all;
}

}  // namespace

TEST(ffn_run_equals_one_block_at_a_time) {
  using moe::FfnActivation;
  for (FfnActivation act : {FfnActivation::Swiglu, FfnActivation::SwigluClamped, FfnActivation::Gelu})
    for (bool bias : {false, true})
      for (bool bf16 : {false, true}) {
        const std::string what = std::string("ffn run, activation ") + std::to_string((int)act) +
                                 (bias ? ", bias" : "") + (bf16 ? ", bf16" : "");
        for_each_backend([&](Backend& be) {
          const Vec together = ffn_outputs(be, act, bias, bf16, true), apart = ffn_outputs(be, act, bias, bf16, false);
          CHECK_MSG(bitwise_equal(together, apart), what + " on " + be.name() + ": differs from one block at a time");
        });
      }
}

TEST_MAIN()
