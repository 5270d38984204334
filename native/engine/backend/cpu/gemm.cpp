// sgemm driver: Goto-style blocking (for each block of up to kMcMax rows and each kc block, A packed once into
// mr-row panels that stay in L1 in turn, then B blocks of kc x nc packed and swept by every A panel from L2, the
// next B block prefetched meanwhile), threads over disjoint C regions (never over K), and the kc blocks are a
// function of K alone so every C element sees the same reduction order. A region of a few columns goes to the
// family's narrow kernel where it has one (run_narrow): A is then read in place, never packed. So is a transposed
// A (a weight gradient's dyᵀ or xᵀ) in regions of up to the family's in_place_a_cols columns: each k of a panel is
// one contiguous run of its rows, as in a packed panel, only lda apart, and copying it first cost a strided pass
// over A that few column tiles then reuse.
#include "backend/cpu/gemm.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/gemm_driver.h"
#include "backend/cpu/gemm_kernels.h"
#include "backend/cpu/pack_buffer.h"

namespace moe::cpu {
namespace {

using gemm::Kernels;

constexpr int kKcMax = 256;   // A panel (14 x kc) stays in L1
constexpr int kNcMax = 384;   // B block (kc x nc = 384 KiB) stays in L2
constexpr int kDirectBRows = 28;  // up to two full A panels
constexpr int kMcMax = 1024;      // rows of A packed at once (1 MiB at kc 256)
constexpr int kPanelMajorRows = 256;  // up to this many rows (A 256 KiB at kc 256, in L2), B goes panel by panel
constexpr int kPanelMajorCBytes = 1 << 20;  // ... and C in column chunks of about this size
// B row strides that alias in L2 (1 MiB, 16 ways: 64 KiB per way): kc rows 8 KiB apart use 8 sets of each way.
constexpr int64_t kAliasedStride = 8 << 10;

const Kernels& kernels() {
  static const Kernels& native = gemm_driver::cpu_features().avx512     ? gemm::avx512_kernels()
                                 : gemm_driver::cpu_features().avx2_fma ? gemm::avx2_kernels()
                                                                        : gemm::scalar_kernels();
  return gemm_driver::for_calling_thread(native, gemm::scalar_kernels());
}

thread_local PackBuffer<float> tl_pack_a("sgemm"), tl_pack_b("sgemm");

struct Problem : gemm_driver::Problem {
  const float* B;
  // op(B) packed once (pack_bt_with): k block k0's panels side by side at packed + k0 * n_pad, panel j / nr at
  // + j * kc; null: B is read (and packed) as it lies.
  const float* packed = nullptr;
  int64_t n_pad = 0;
  const float* b_at(int k, int j) const { return B + b_offset(k, j); }
  const float* packed_at(int k0, int kc, int j) const { return packed + k0 * n_pad + int64_t{j} * kc; }
};

bool a_in_place(const Kernels& kern, const Problem& p, double cols) { return p.ta && cols <= kern.in_place_a_cols; }

// Where block (k0, kc) x (jc, nc) of op(B) lies in memory, as rows for the kernels to prefetch.
gemm::Prefetch block_rows(const Problem& p, int k0, int kc, int jc, int nc) {
  const char* base = reinterpret_cast<const char*>(p.b_at(k0, jc));
  const int64_t stride = p.ldb * int64_t{sizeof(float)};
  return p.tb ? gemm::Prefetch{base, stride, nc > 0 ? kc * 4 : 0, nc} : gemm::Prefetch{base, stride, nc * 4, kc};
}

// One block of up to kMcMax rows of a thread's region [.., m1) x [n0, n1): its A packed per k block into mr-row
// panels at `ap`, swept over the columns with B packed at `bp` (or read in place).
struct RowBlock {
  const Kernels& kern;
  const Problem& p;
  int mc, rows, panels;  // first row, rows, A panels
  int m1, n0, n1;        // the region's row end and columns
  int nc_max;
  bool pack_b, fused_pack;
  float *ap, *bp;  // ap: null where A is read in place

  // Balanced panel heights: 64 rows become 13,13,13,13,12 rather than 14x4 + 8.
  int panel_row(int ip) const { return rows * ip / panels; }
  bool last_row_block() const { return mc + kMcMax >= m1; }
  // The A panel of rows [r0, r1) for k block k0 and the distance between its k runs.
  const float* a_panel(int r0, int k0, int kc) const { return ap ? ap + int64_t{r0} * kc : p.a_at(mc + r0, k0); }
  int64_t a_k(int r0, int r1) const { return ap ? r1 - r0 : p.lda; }

  void pack_a(int k0, int kc) const {
    if (!ap) return;
    for (int ip = 0; ip < panels; ++ip) {
      const int r0 = panel_row(ip), r1 = panel_row(ip + 1);
      kern.pack_a(p.ta, p.a_at(mc + r0, k0), p.lda, r1 - r0, kc, ap + static_cast<int64_t>(r0) * kc);
    }
  }

  // Few rows (an expert's tokens): B is the big operand, streamed once, one panel of columns [jc0, jc1) at a time:
  // packed just before the A panels sweep it (by a copy loop, or by the first A panel's kernels as they read it),
  // while the calls prefetch the next panel's rows, so the weight streams in evenly under the FMAs.
  void sweep_panels(int jc0, int jc1, int k0, int kc, float beta, bool load_c) const {
    const int nr = kern.nr;
    for (int jr = jc0; jr < jc1; jr += nr) {
      const int cols = std::min(nr, jc1 - jr);
      // The next panel: of this chunk, else the chunk's first of the next k block, else the next chunk's or the
      // next row block's first.
      const bool in_chunk = jr + nr < jc1, in_k = k0 + kc < p.K;
      const int jn = in_chunk ? jr + nr : in_k ? jc0 : jc1 < n1 ? jc1 : n0;
      const int kn = in_chunk ? k0 : in_k ? k0 + kc : 0;
      const bool last = !in_chunk && !in_k && jc1 >= n1 && last_row_block();
      gemm::Prefetch next =
          last ? gemm::Prefetch{} : block_rows(p, kn, std::min(p.kc, p.K - kn), jn, std::min(nr, n1 - jn));
      const int rows_per_call = (next.rows + panels - 1) / panels;
      if (!fused_pack) kern.pack_b(p.tb, p.b_at(k0, jr), p.ldb, kc, cols, bp);
      for (int ip = 0; ip < panels; ++ip) {
        const int r0 = panel_row(ip), r1 = panel_row(ip + 1);
        const bool in_place = fused_pack && ip == 0;
        gemm::Prefetch pf = next;
        pf.rows = std::min(rows_per_call, next.rows);
        if (pf.rows > 0) next.p += pf.rows * next.stride, next.rows -= pf.rows;
        kern.kernel(r1 - r0, cols, kc, a_panel(r0, k0, kc), a_k(r0, r1), in_place ? p.b_at(k0, jr) : bp,
                    in_place ? nr : int64_t{kc} * nr, in_place ? p.ldb : nr, p.C + (mc + r0) * p.ldc + jr, p.ldc,
                    p.alpha, beta, load_c, in_place ? bp : nullptr, pf);
      }
    }
  }

  // More rows: B blocks of kc x nc packed once (or read in place) and swept by every A panel from L2.
  void sweep_blocks(int k0, int kc, float beta, bool load_c) const {
    const int nr = kern.nr;
    for (int jc = n0; jc < n1; jc += nc_max) {
      const int nc = std::min(nc_max, n1 - jc);
      // The block after this one (next columns, else next k block, else the next row block's first), spread
      // over this block's kernel calls (one 32-column panel each for all but the shortest A panels).
      const int kn = jc + nc < n1 ? k0 : k0 + kc < p.K ? k0 + kc : 0;
      const int jn = jc + nc < n1 ? jc + nc : n0;
      const bool last = jc + nc >= n1 && k0 + kc >= p.K && last_row_block();
      // A packed B streams in order: the hardware prefetchers follow it.
      gemm::Prefetch next = last || p.packed
                                ? gemm::Prefetch{}
                                : block_rows(p, kn, std::min(p.kc, p.K - kn), jn, std::min(nc_max, n1 - jn));
      const int calls = panels * ((nc + nr - 1) / nr);
      const int rows_per_call = (next.rows + calls - 1) / calls;
      if (pack_b && !fused_pack)
        for (int jr = 0; jr < nc; jr += nr)
          kern.pack_b(p.tb, p.b_at(k0, jc + jr), p.ldb, kc, std::min(nr, nc - jr), bp + static_cast<int64_t>(jr) * kc);
      for (int ip = 0; ip < panels; ++ip) {
        const int r0 = panel_row(ip), r1 = panel_row(ip + 1);
        const bool in_place = !p.packed && (!pack_b || (fused_pack && ip == 0));
        const float* b = p.packed ? p.packed_at(k0, kc, jc) : in_place ? p.b_at(k0, jc) : bp;
        const int64_t panel_stride = in_place ? nr : int64_t{kc} * nr, k_stride = in_place ? p.ldb : nr;
        for (int jr = 0; jr < nc;) {
          gemm::Prefetch pf = next;
          pf.rows = std::min(rows_per_call, next.rows);
          if (pf.rows > 0) next.p += pf.rows * next.stride, next.rows -= pf.rows;
          jr += kern.kernel(r1 - r0, nc - jr, kc, a_panel(r0, k0, kc), a_k(r0, r1), b + jr / nr * panel_stride,
                            panel_stride, k_stride, p.C + (mc + r0) * p.ldc + jc + jr, p.ldc, p.alpha, beta, load_c,
                            fused_pack && ip == 0 ? bp + static_cast<int64_t>(jr) * kc : nullptr, pf);
        }
      }
    }
  }
};

// A few columns: per k block, B packed (a few panels) and the region's rows of A read where they lie, once.
void run_narrow(const Kernels& kern, const Problem& p, int m0, int m1, int n0, int n1) {
  const int cols = n1 - n0, panels = (cols + kern.nr - 1) / kern.nr;
  float* bp = p.packed ? nullptr : tl_pack_b.get(static_cast<size_t>(p.kc) * panels * kern.nr);
  const int64_t a_row = p.ta ? 1 : p.lda, a_k = p.ta ? p.lda : 1;
  for (int k0 = 0; k0 < p.K; k0 += p.kc) {
    const int kc = std::min(p.kc, p.K - k0);
    const bool first = k0 == 0;
    for (int q = 0; q < panels && !p.packed; ++q)
      kern.pack_b(p.tb, p.b_at(k0, n0 + q * kern.nr), p.ldb, kc, std::min(kern.nr, cols - q * kern.nr),
                  bp + static_cast<int64_t>(q) * kc * kern.nr);
    kern.narrow(m1 - m0, cols, kc, p.a_at(m0, k0), a_row, a_k, p.packed ? p.packed_at(k0, kc, n0) : bp,
                p.C + m0 * p.ldc + n0, p.ldc, p.alpha,
                first ? p.beta : 1.0f, !first || p.beta != 0.0f);
  }
}

// A few rows against a Bᵀ read where it lies (Kernels::direct_bt): each group of columns runs every k block in turn,
// so each of B's rows is read from start to end once.
void run_direct(const Kernels& kern, const Problem& p, int n0, int n1) {
  const int64_t a_row = p.ta ? 1 : p.lda, a_k = p.ta ? p.lda : 1;
  for (int jc = n0; jc < n1; jc += gemm::kDirectCols) {
    const int cols = std::min(gemm::kDirectCols, n1 - jc);
    for (int k0 = 0; k0 < p.K; k0 += p.kc) {
      const bool first = k0 == 0;
      kern.direct_bt(p.M, cols, std::min(p.kc, p.K - k0), p.a_at(0, k0), a_row, a_k, p.b_at(k0, jc), p.ldb, p.C + jc,
                     p.ldc, p.alpha, first ? p.beta : 1.0f, !first || p.beta != 0.0f);
    }
  }
}

void run_region(const Kernels& kern, const Problem& p, int m0, int m1, int n0, int n1) {
  if (m0 >= m1 || n0 >= n1) return;
  if (kern.narrow && n1 - n0 <= kern.narrow_cols) return run_narrow(kern, p, m0, m1, n0, n1);
  const int nr = kern.nr;
  // With few rows each B element is used by one or two tiles: reading a non-transposed B in place beats
  // copying it first. With more, a non-transposed B is packed by the first A panel's kernels as they read it,
  // except, panel by panel, when its rows lie a multiple of kAliasedStride bytes apart: a panel's rows then share
  // a few L2 sets and overflow them, so the kernels' in-place reads go to memory with a short prefetch; a copy
  // loop of its own keeps more misses in flight.
  const bool pack_b = !p.packed && (p.tb || m1 - m0 > kDirectBRows);
  const bool aliased = p.ldb * int64_t{sizeof(float)} % kAliasedStride == 0;
  const bool fused_pack = pack_b && !p.tb && !(m1 - m0 <= kPanelMajorRows && aliased);
  const int nc_max = std::min(kNcMax / nr * nr, (n1 - n0 + nr - 1) / nr * nr);
  // (At least four panels: a packing tile of few rows writes the panels it spans, up to four.)
  float* bp = pack_b ? tl_pack_b.get(static_cast<size_t>(p.kc) * std::max(nc_max, 4 * nr)) : nullptr;
  float* ap =
      a_in_place(kern, p, n1 - n0) ? nullptr : tl_pack_a.get(static_cast<size_t>(p.kc) * std::min(m1 - m0, kMcMax));
  for (int mc = m0; mc < m1; mc += kMcMax) {
    const int rows = std::min(kMcMax, m1 - mc);
    const RowBlock rb{kern, p, mc, rows, (rows + kern.mr_max - 1) / kern.mr_max, m1, n0, n1, nc_max, pack_b,
                      fused_pack, ap, bp};
    // Panel by panel, C is updated once per k block: its columns go in chunks whose rows x chunk stays in L2
    // across the k blocks (A is packed again per chunk, a small cost beside streaming C from memory each time).
    // Not for a thin K (at most half the rows: a LoRA adapter's rank), where C is the big operand: the block sweep
    // walks along C's rows rather than down its columns, whose rows, often a power of two apart, share cache sets.
    const bool panel_major = pack_b && rows <= kPanelMajorRows && 2 * p.K > rows;
    const int chunk = panel_major ? std::max(nr, kPanelMajorCBytes / (rows * int{sizeof(float)}) / nr * nr) : n1 - n0;
    for (int jc0 = n0; jc0 < n1; jc0 += chunk) {
      for (int k0 = 0; k0 < p.K; k0 += p.kc) {
        const int kc = std::min(p.kc, p.K - k0);
        const bool first = k0 == 0;
        const float beta = first ? p.beta : 1.0f;
        const bool load_c = !first || p.beta != 0.0f;
        rb.pack_a(k0, kc);  // reused by every column block of this k block (none where A is read in place)
        if (panel_major) rb.sweep_panels(jc0, std::min(n1, jc0 + chunk), k0, kc, beta, load_c);
        else rb.sweep_blocks(k0, kc, beta, load_c);
      }
    }
  }
}

}  // namespace

namespace gemm {

namespace {

// p over the threads: a few rows against a Bᵀ read where it lies go direct, column groups to each thread; else
// regions by the slowest thread's FMA, packing and C work.
void run(const Kernels& kern, ThreadPool& tp, const Problem& p) {
  // Narrow products keep their kernel (they read A in place already); a few rows over many columns go direct.
  if (!p.packed && kern.direct_bt && p.tb && p.M <= gemm::kDirectRowsMax && !(kern.narrow && p.N <= kern.narrow_cols)) {
    // Threads split the columns only: every one needs all of A's few rows.
    auto columns = [](double mt, double nt, int) { return nt * (mt + gemm::kDirectRowsMax); };
    return gemm_driver::run_regions(tp, p.M, p.N, p.K, gemm::kDirectCols, columns,
                                    [&](int, int, int n0, int n1) { run_direct(kern, p, n0, n1); });
  }
  const double b_packs = p.packed ? 0.0 : 1.0;
  auto cost = [&](double mt, double nt, int tn) {
    const double a_packs = a_in_place(kern, p, nt) ? 0.0 : 1.0;
    double c = mt * nt * p.K / 16.0 + 0.5 * p.K * (b_packs * nt * std::ceil(mt / kMcMax) + a_packs * mt);
    // Cutting rows into pieces makes every pass over C write short strided runs; it shows when K is small.
    if (tn > 1) c += 0.25 * mt * nt * std::ceil(double(p.K) / kKcMax);
    return c;
  };
  gemm_driver::run_regions(tp, p.M, p.N, p.K, kern.nr, cost,
                           [&](int m0, int m1, int n0, int n1) { run_region(kern, p, m0, m1, n0, n1); });
}

int block_k(int K) { return gemm_driver::block_k(K, kKcMax, false); }
int64_t padded_columns(const Kernels& kern, int N) { return (int64_t{N} + kern.nr - 1) / kern.nr * kern.nr; }

}  // namespace

void sgemm_with(const Kernels& kern, ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  if (!gemm_driver::prepare("sgemm", trans_a, trans_b, M, N, K, lda, ldb, beta, C, ldc)) return;
  run(kern, tp, Problem{{trans_a, trans_b, M, N, K, block_k(K), alpha, beta, A, lda, ldb, C, ldc}, B});
}

size_t packed_bt_floats(const Kernels& kern, int N, int K) { return static_cast<size_t>(padded_columns(kern, N)) * K; }

void pack_bt_with(const Kernels& kern, ThreadPool& tp, const float* B, int ldb, int N, int K, float* dst) {
  const int kc_max = block_k(K);
  const int64_t n_pad = padded_columns(kern, N);
  const int panels = static_cast<int>(n_pad / kern.nr);
  tp.parallel_for(panels, [&](int64_t q0, int64_t q1, int) {
    for (int k0 = 0; k0 < K; k0 += kc_max) {
      const int kc = std::min(kc_max, K - k0);
      for (int64_t q = q0; q < q1; ++q) {
        const int j = static_cast<int>(q) * kern.nr;
        kern.pack_b(true, B + int64_t{j} * ldb + k0, ldb, kc, std::min(kern.nr, N - j), dst + k0 * n_pad + j * kc);
      }
    }
  });
}

void sgemm_packed_bt_with(const Kernels& kern, ThreadPool& tp, int M, int N, int K, float alpha, const float* A,
                          int lda, const float* packed, float beta, float* C, int ldc) {
  if (!gemm_driver::prepare("sgemm", false, true, M, N, K, lda, K, beta, C, ldc)) return;
  Problem p{{false, true, M, N, K, block_k(K), alpha, beta, A, lda, K, C, ldc}, nullptr};
  p.packed = packed;
  p.n_pad = padded_columns(kern, N);
  run(kern, tp, p);
}

}  // namespace gemm

void sgemm(ThreadPool& tp, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  gemm::sgemm_with(kernels(), tp, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char* sgemm_isa() { return kernels().name; }

size_t sgemm_pack_bt_floats(int N, int K) { return gemm::packed_bt_floats(kernels(), N, K); }

void sgemm_pack_bt(ThreadPool& tp, const float* B, int ldb, int N, int K, float* dst) {
  gemm::pack_bt_with(kernels(), tp, B, ldb, N, K, dst);
}

void sgemm_packed_bt(ThreadPool& tp, int M, int N, int K, float alpha, const float* A, int lda, const float* packed,
                     float beta, float* C, int ldc) {
  gemm::sgemm_packed_bt_with(kernels(), tp, M, N, K, alpha, A, lda, packed, beta, C, ldc);
}

}  // namespace moe::cpu
