// The CUDA GEMMs' vector loads and fp32 micro-tiles (backend/cuda/gemm_tile_io.h), checked on the CPU, where the
// indexing can be wrong without a GPU to show it: a block's threads read every element of a k slice exactly once,
// four adjacent in memory at a time; a vector counts as inside the operand exactly when its four elements are;
// each element lands in the shared tile where the one-element path puts it; the vector stores are aligned, one
// word each in the bf16 kernel's tiles, whose fragments WMMA can load; and the
// fp32 threads' micro-tiles cover the block tile once, in aligned fours a quarter warp reads without conflicts.
#include <string>
#include <vector>

#include "backend/cuda/gemm_tile_io.h"
#include "testing.h"

namespace io = moe::cuda::tile_io;

namespace {

template <bool kTransposed, int kTile, int kThreads>
void check_slice_cover() {
  constexpr int kDepth = io::bf16::kDepth;
  const std::string what = std::string(kTransposed ? "transposed" : "row-major") + " tile " + std::to_string(kTile) +
                           ", " + std::to_string(kThreads) + " threads";
  std::vector<int> seen(kTile * kDepth, 0);
  for (int t = 0; t < kThreads; ++t)
    io::for_each_vector<kTransposed, kTile, kDepth, kThreads>(t, [&](int, int r, int k) {
      CHECK_MSG((kTransposed ? r : k) % io::kVec == 0, what + ": a vector starts off its alignment");
      for (int j = 0; j < io::kVec; ++j) {
        int rj, kj;
        io::element<kTransposed>(r, k, j, rj, kj);
        CHECK_MSG(rj >= 0 && rj < kTile && kj >= 0 && kj < kDepth, what + ": an element outside the slice");
        if (rj >= 0 && rj < kTile && kj >= 0 && kj < kDepth) ++seen[rj * kDepth + kj];
        // Adjacent in global memory, whatever the leading dimension.
        CHECK_MSG(io::offset<kTransposed>(rj, kj, 1000) == io::offset<kTransposed>(r, k, 1000) + j,
                  what + ": a vector's elements are not adjacent in memory");
      }
    });
  for (int n : seen) CHECK_MSG(n == 1, what + ": an element of the slice read " + std::to_string(n) + " times");
  // Consecutive threads' first vectors are consecutive in memory (coalesced reads).
  int r0, k0, r1, k1;
  io::vector_coords<kTransposed>(0, kTile, kDepth, r0, k0);
  io::vector_coords<kTransposed>(1, kTile, kDepth, r1, k1);
  CHECK_MSG(io::offset<kTransposed>(r1, k1, 1000) == io::offset<kTransposed>(r0, k0, 1000) + io::kVec,
            what + ": neighbouring threads' vectors are not neighbours in memory");
}

// Every vector start near the operand's edges: inside exactly when all four elements are.
template <bool kTransposed>
void check_inside() {
  for (int rows : {1, 3, 4, 5, 8, 67})
    for (int K : {1, 4, 6, 31, 33})
      for (int r = 0; r < rows + 8; r += kTransposed ? io::kVec : 1)
        for (int k = 0; k < K + 8; k += kTransposed ? 1 : io::kVec) {
          bool all = true;
          for (int j = 0; j < io::kVec; ++j) {
            int rj, kj;
            io::element<kTransposed>(r, k, j, rj, kj);
            all = all && rj < rows && kj < K;
          }
          CHECK_MSG(io::vector_inside<kTransposed>(r, k, rows, K) == all,
                    "vector_inside is wrong at (" + std::to_string(r) + ", " + std::to_string(k) + ") of " +
                        std::to_string(rows) + "x" + std::to_string(K));
        }
}

// A slice's shared tile, stored [r][k] or [k][r] with the kernel's padded leading dimension: each element goes where
// the one-element path stores it; adjacent elements form an 8-byte-aligned word (bf16: 2 bytes each).
template <bool kTransposed, bool kRowMajor, int kTile, int kThreads>
void check_shared_places(int ld) {
  const std::string what = std::string(kRowMajor ? "[r][k]" : "[k][r]") + " tile, " +
                           (kTransposed ? "transposed" : "row-major") + " operand, tile " + std::to_string(kTile);
  std::vector<int> hit(kRowMajor ? kTile * ld : io::bf16::kDepth * ld, 0);
  for (int t = 0; t < kThreads; ++t)
    io::for_each_vector<kTransposed, kTile, io::bf16::kDepth, kThreads>(t, [&](int, int r, int k) {
      const int first = io::shared_index<kTransposed, kRowMajor>(r, k, 0, ld);
      if (io::contiguous_in_shared<kTransposed, kRowMajor>())
        CHECK_MSG(first * 2 % 8 == 0, what + ": an 8-byte store off its alignment");
      for (int j = 0; j < io::kVec; ++j) {
        int rj, kj;
        io::element<kTransposed>(r, k, j, rj, kj);
        const int at = io::shared_index<kTransposed, kRowMajor>(r, k, j, ld);
        CHECK_MSG(at == io::bf16::tile_offset(kRowMajor, ld, rj, kj), what + ": an element off its one-element place");
        if (io::contiguous_in_shared<kTransposed, kRowMajor>())
          CHECK_MSG(at == first + j, what + ": a vector stored as one word is not adjacent there");
        if (at >= 0 && at < static_cast<int>(hit.size())) ++hit[at];
      }
    });
  int written = 0;
  for (int n : hit) {
    CHECK_MSG(n <= 1, what + ": two elements in one place");
    written += n;
  }
  CHECK_MSG(written == kTile * io::bf16::kDepth, what + ": not every element of the slice was stored");
}

// The bf16 kernel's own tile for an operand (gemm_bf16.cu: A with rows m, transposed when TA; B with rows n,
// transposed unless TB): every vector one word; the tile within its size; and each 16×16 fragment WMMA loads from
// it (first rows every 16, k at 0 and 16) on a 32-byte boundary with a leading dimension of whole 16 bytes, in a
// tile whose size keeps the next tile on such a boundary.
template <bool kTransposed, int kTile, int kThreads>
void check_kernel_tile() {
  constexpr bool row = io::bf16::row_major_tile<kTransposed>();
  constexpr int ld = io::bf16::tile_ld(row, kTile);
  static_assert(io::contiguous_in_shared<kTransposed, row>(), "the kernel's tiles store every vector as one word");
  check_shared_places<kTransposed, row, kTile, kThreads>(ld);
  const std::string what = std::string(kTransposed ? "transposed" : "row-major") + " operand, tile " +
                           std::to_string(kTile);
  CHECK_MSG(ld * 2 % 16 == 0, what + ": a leading dimension WMMA cannot load");
  CHECK_MSG(io::bf16::tile_elements(row, kTile) * 2 % 32 == 0, what + ": the next tile off a 32-byte boundary");
  CHECK_MSG(io::bf16::tile_offset(row, ld, kTile - 1, io::bf16::kDepth - 1) < io::bf16::tile_elements(row, kTile),
            what + ": the slice outgrows its tile");
  for (int r = 0; r < kTile; r += 16)
    for (int k = 0; k < io::bf16::kDepth; k += 16)
      CHECK_MSG(io::bf16::tile_offset(row, ld, r, k) * 2 % 32 == 0,
                what + ": the fragment at (" + std::to_string(r) + ", " + std::to_string(k) + ") off 32 bytes");
}

}  // namespace

TEST(a_block_reads_each_slice_element_once_in_adjacent_fours) {
  check_slice_cover<false, 64, 128>();
  check_slice_cover<true, 64, 128>();
  check_slice_cover<false, 128, 256>();
  check_slice_cover<true, 128, 256>();
}

TEST(a_vector_is_inside_exactly_when_its_elements_are) {
  check_inside<false>();
  check_inside<true>();
}

TEST(vectors_land_where_single_elements_do) {
  check_kernel_tile<false, 128, 256>();
  check_kernel_tile<true, 128, 256>();
  check_kernel_tile<false, 64, 128>();
  check_kernel_tile<true, 64, 128>();
  // A tile across the operand's contiguous dimension still places every element right, one at a time.
  check_shared_places<false, false, 128, 256>(io::bf16::tile_ld(false, 128));
  check_shared_places<true, true, 64, 128>(io::bf16::tile_ld(true, 64));
}

namespace {

// Shared tiles of fp32 ([k][r], leading dimension tile + 4): each element where the one-element path puts it, and a
// contiguous vector one aligned 16-byte store.
template <bool kTransposed, int kTile>
void check_fp32_places() {
  constexpr int kDepth = io::f32::kDepth, kThreads = io::f32::kThreads, ld = kTile + 4;
  std::vector<int> hit(kDepth * ld, 0);
  for (int t = 0; t < kThreads; ++t)
    io::for_each_vector<kTransposed, kTile, kDepth, kThreads>(t, [&](int, int r, int k) {
      const int first = io::shared_index<kTransposed, false>(r, k, 0, ld);
      if (io::contiguous_in_shared<kTransposed, false>())
        CHECK_MSG(first * 4 % 16 == 0, "a 16-byte fp32 store off its alignment");
      for (int j = 0; j < io::kVec; ++j) {
        int rj, kj;
        io::element<kTransposed>(r, k, j, rj, kj);
        const int at = io::shared_index<kTransposed, false>(r, k, j, ld);
        CHECK_MSG(at == kj * ld + rj, "an fp32 element off its one-element place");
        ++hit[kj * ld + rj];
      }
    });
  int written = 0;
  for (int n : hit) {
    CHECK_MSG(n <= 1, "two fp32 elements in one place");
    written += n;
  }
  CHECK_MSG(written == kTile * kDepth, "not every fp32 element of the slice was stored");
}

}  // namespace

TEST(fp32_vectors_land_where_single_elements_do) {
  check_fp32_places<false, 64>();
  check_fp32_places<true, 64>();
  check_fp32_places<false, 128>();
  check_fp32_places<true, 128>();
}

TEST(fp32_micro_tiles_cover_the_block_tile_in_conflict_free_fours) {
  for (int micro : {4, 8}) {
    std::vector<int> seen(16 * micro, 0);
    for (int t = 0; t < 16; ++t)
      for (int i = 0; i < micro; ++i) {
        const int at = io::micro_index(i, t);
        CHECK_MSG(at >= 0 && at < 16 * micro, "a micro-tile element outside the block tile");
        if (at >= 0 && at < 16 * micro) ++seen[at];
        if (i % io::kVec == 0) CHECK_MSG(at % io::kVec == 0, "a group of four off its 16-byte alignment");
        else CHECK_MSG(at == io::micro_index(i - 1, t) + 1, "a group of four is not adjacent");
      }
    for (int n : seen) CHECK_MSG(n == 1, "a block-tile row covered " + std::to_string(n) + " times");
    // Eight consecutive threads' groups: 16 bytes apart, so 32 distinct banks.
    for (int g = 0; g < micro; g += io::kVec)
      for (int t = 0; t + 1 < 8; ++t)
        CHECK_MSG(io::micro_index(g, t + 1) - io::micro_index(g, t) == io::kVec, "a quarter warp's reads collide");
  }
}

TEST(vector_loads_need_an_aligned_base_and_leading_dimension) {
  alignas(16) float f[16] = {};
  alignas(16) uint16_t h[16] = {};
  CHECK(io::vectors_fit(f, 8, sizeof(float)));
  CHECK(!io::vectors_fit(f + 1, 8, sizeof(float)));
  CHECK(!io::vectors_fit(f, 6, sizeof(float)));
  CHECK(io::vectors_fit(h + 4, 12, sizeof(uint16_t)));
  CHECK(!io::vectors_fit(h + 2, 12, sizeof(uint16_t)));
}

TEST_MAIN()
