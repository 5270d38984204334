// Where each expert's rows are computed across D devices, for one MoE layer and one step, so that
// devices carry balanced loads. Pure functions of the token counts: no threads, no backend, deterministic.
//
// Static       expert e on device e mod D (standard expert parallelism, the baseline).
// Greedy       ES-MoE §4.2, Graham's LPT list scheduling, over jobs that are whole experts or (greedy_split)
//              pieces of the experts heavier than a device's fair share. With total = Σ rows and
//              fair = ceil(total / D), an expert with rows > fair is cut into k = min(D, ceil(rows / fair))
//              contiguous near-equal pieces, piece i = rows [rows·i/k, rows·(i+1)/k) (integer division), with k
//              lowered until the smallest piece floor(rows / k) ≥ min_tokens (k ≥ 1, so an expert may stay whole);
//              every other expert with rows is one job. A job costs max(upload, rows × compute per token): each
//              piece pays its own upload. The jobs, by cost descending (ties: lower expert, then lower begin), each
//              go to the device with the least accumulated cost among those not yet holding a piece of the same
//              expert (ties: lower device); k ≤ D keeps one such device free, and a device holds at most one piece
//              of an expert (one weight copy per (expert, device)).
//              Why cut: a whole expert with H of the T rows keeps max/mean ≥ H × D / T whatever the rest does (3.8
//              when 95% of the tokens pick one expert among their top-2 on 8 devices); with offload any device can
//              load any expert for a step, so its rows can be shared out, at one upload per piece.
//              The split schedule is kept only when its makespan is below the whole-expert one (ties: whole):
//              cutting can lose (the one-piece-per-device rule can deny a piece the least-loaded device: {39, 37}
//              on 2 devices with min_tokens 1 cuts to 56 against 39 whole; every extra piece pays an upload).
//              Bounds: the result is never worse than LPT over whole experts, so makespan ≤ (4/3 − 1/(3D)) × the
//              whole-expert optimum (Graham). Against the best assignment of the cut pieces Graham's bound does not
//              hold; brute-forced small instances stayed within (2 − 1/D) of it (checked, not proven).
// LeastLoaded  LLEP's least-loaded assignment over the static homes. If max/mean load ≤ lambda, it is Static.
//              Otherwise, with mean = total / D, cap = floor(alpha × mean) and receivers = the devices whose static
//              load ≤ mean, each donor (static load > mean; heaviest first, ties: lower device) sheds
//              excess = load − ceil(mean) rows. It walks its experts by tokens descending (ties: lower expert);
//              while excess ≥ min_tokens it picks the least-loaded receiver (ties: lower device), and stops when
//              that receiver's room (cap − load) < min_tokens. With want = min(excess, room), the piece moved is
//              the expert's whole rest at home when want covers it, else min(want, rest − min_tokens) rows taken
//              from the end of the rest, so home keeps the first rows and no piece is below min_tokens; when that
//              piece would be below min_tokens the donor goes on to its next expert.
//              So receivers end ≤ alpha × mean, donors never receive, and a receiver gets at most one piece of an
//              expert.
#pragma once
#include <cstdint>
#include <vector>

namespace moe {

enum class PlacementPolicy { Static, Greedy, LeastLoaded };

struct PlacementConfig {
  PlacementPolicy policy = PlacementPolicy::Static;
  int devices = 1;      // D
  double lambda = 1.3;  // LLEP: rebalance only when max/mean device load > lambda (range [1, 10])
  double alpha = 1.1;   // LLEP: a device receiving spilled tokens is capped at alpha × mean load (range [1, 10])
  int min_tokens = 32;  // LLEP and split greedy: never cut a piece smaller than this (one GEMM's minimum useful rows)
  bool greedy_split = true;  // greedy cuts experts heavier than the fair share; false: ES-MoE's whole-expert greedy
};

// The cost of an expert on a device for the greedy policy (ES-MoE): max(upload time, compute time), since the
// upload of one expert overlaps the compute of another; with no offload the upload time is 0.
struct ExpertCostModel {
  double compute_ms_per_token = 1.0;  // > 0
  double upload_ms_per_expert = 0.0;  // ≥ 0
};

// A contiguous piece of one expert's rows [begin, begin + count) computed on `device`.
struct ExpertPiece {
  int expert, device;
  int32_t begin, count;
};

struct Placement {
  std::vector<ExpertPiece> pieces;                // every expert with rows, in expert order, then by begin
  std::vector<int> home;                          // [E] device holding the expert's weights before placement (e mod D)
  std::vector<int64_t> load_before, load_after;   // [D] tokens per device: static homes vs this placement
  double imbalance_before = 1, imbalance_after = 1;  // max/mean of those (1 when every load is 0)
  int64_t spilled_tokens = 0;                     // tokens computed away from their expert's home device
  int moved_experts = 0;  // (expert, device) pairs away from home: the weight copies this placement needs
};

// Throws EngineError naming the field (placement.devices, placement.lambda, ...) when an input is out of range.
Placement place_experts(const PlacementConfig& cfg, const std::vector<int32_t>& tokens_per_expert,
                        const ExpertCostModel& cost);

const char* placement_policy_name(PlacementPolicy p);

}  // namespace moe
