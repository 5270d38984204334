// Which memory-reuse strategy a pipelined MoE layer should use (pipelining): MPipeMoE §III-D/E. With
// the B tokens split into n micro-batches, the buffers of T_DI (dispatched input, B×M), T_M (hidden, B×H) and T_DO
// can be shared between partitions, but T_DI and T_M are then overwritten before the backward pass needs them.
// Table II's strategies restore them in different ways:
//   strategy  T_DI       T_M        μ       η       Q_fw       Q_bw
//   None      kept       kept       μ_comp  -       [2,2,0]    [4,2,0]    (no reuse: the baseline)
//   S1        offload    offload    μ_all   η_all   [2,2,1+r]  [4,2,1+r]
//   S2        re-send    offload    μ_all   η_all   [2,2,r]    [4,3,r]
//   S3        offload    recompute  μ_all   η_all   [2,2,1]    [5,2,1]
//   S4        re-send    recompute  μ_comp  -       [2,2,0]    [5,3,0]
// Q = [GEMMs, all-to-alls, host↔device copies in units of T_DI's size]; r = H/M is T_M's size in those units
// (the paper's 5 and 4 are 1 + r and r at H = 4M; H need not be 4M here). Offloads copy device→host in the forward
// pass and prefetch host→device in the backward pass; "re-send" repeats the dispatch all-to-all, "recompute"
// repeats the first GEMM.
//
// Per micro-batch of b = B/n tokens, with s bytes per element:
//   v_0,comp = 2·b·H·M FLOP        (eq. 7 counts the b·H·M multiply-adds of one expert GEMM; ×2 for FLOP)
//   v_0,comm = b·M·s bytes         (eq. 8, one all-to-all)
//   v_0,mem  = b·M·s bytes         (eq. 9, one copy of T_DI)
//   C = max(q1·v_0,comp / (σ·W_comp), q2·v_0,comm / (μ·W_comm), q3·v_0,mem / (η·W_mem))   (eq. 10)
// the three streams overlapping, the slowest one setting the pace. A pass runs n micro-batches, n·C(B/n) = C(B)
// since C is linear in b (pipeline fill and drain ignored, as in the paper), so the time does not depend on n.
// Memory (elements × s bytes):
//   M_ms = 4·(E·M + 2·H·M)                                         (eq. 1: Adam's four copies of the gate + expert)
//   M_act^pipe = M_buf^pipe = 4·B·M + B·H                          (eq. 4)
//   ΔM_act = ΔM_buf = B·(2M·(n−2)/n + H·(n−1)/n)                   (eq. 5)
//   φ = (ΔM_act + ΔM_buf) / (M_ms + M_act^pipe + M_buf^pipe)       (eq. 6)
// Every reuse strategy saves ΔM_act + ΔM_buf; None saves nothing. n ≥ 2, since with one partition there is no
// buffer to share (eq. 5 would be negative).
#pragma once
#include <array>
#include <cstdint>

namespace moe {

enum class ReuseStrategy { None, S1, S2, S3, S4 };

// Speeds measured on this machine (§II-C). W_* are each stream alone; σ, μ, η in (0, 1] are the slowdowns when the
// streams overlap (x = comp: beside compute; x = all: beside compute and the other transfer).
struct StreamSpeeds {
  double w_comp = 0;    // W_comp: expert GEMM throughput, FLOP/s
  double w_comm = 0;    // W_comm: all-to-all (dispatch/combine) bandwidth, bytes/s sent by one device
  double w_mem = 0;     // W_mem: host↔device copy bandwidth, bytes/s
  double sigma = 1;     // σ: compute beside the other streams (the paper measures ≈ 1 and fixes it)
  double mu_comp = 1;   // μ_comp: all-to-all beside compute
  double mu_all = 1;    // μ_all: all-to-all beside compute and copies
  double eta_all = 1;   // η_all: copies beside compute and all-to-all
};

// One MoE layer on one device (Table I): B tokens, model dim M, hidden dim H, E experts, n partitions.
struct LayerSizes {
  int64_t B = 0, M = 0, H = 0, E = 0;
  int n = 2;
  int bytes_per_element = 4;  // s
};

struct ReuseCost {
  ReuseStrategy strategy;
  std::array<double, 3> q_fw, q_bw;  // Table II's Q
  double mu, eta;                    // the slowdowns applied; eta 0 where there is no copy stream
  double forward_ms = 0, backward_ms = 0;  // eq. 10 over the n micro-batches
  double extra_ms = 0;      // forward + backward − None's: what the saving costs per step
  double saved_bytes = 0;   // ΔM_act + ΔM_buf (eq. 5)
  double saving_ratio = 0;  // φ (eq. 6)
};

// Indexed by ReuseStrategy. Throws EngineError naming the field (pipeline.w_comp, pipeline.n, ...) when an input
// is out of range.
std::array<ReuseCost, 5> reuse_costs(const StreamSpeeds& speeds, const LayerSizes& layer);

// The reuse strategy (S1..S4) with the lowest forward + backward cost of eq. 10, the choice made once reuse is on.
// None is left out: it is the baseline and, doing no extra work, never costs more when μ_all ≤ μ_comp. Ties go to
// the earlier strategy in Table II (S1 before S2 ...).
ReuseStrategy choose_strategy(const StreamSpeeds& speeds, const LayerSizes& layer);

const char* reuse_strategy_name(ReuseStrategy s);

}  // namespace moe
