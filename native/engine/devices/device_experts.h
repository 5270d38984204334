// One MoE layer's routed experts computed on the run's D devices: each step the placement policy
// cuts the experts' rows into pieces per device; each device's rows are split into n partitions (MPipeMoE
// micro-batches) and run as a job graph on its streams: rows in (comm), expert FFN (compute), rows out (comm),
// and, under memory reuse, activations to the host (mem). Weights go to the devices that compute an expert away
// from its home, and gradients come back: a home piece accumulates straight into the expert's gradient, a guest
// piece into a buffer of its device that is sent home and summed in piece order after the pass.
//
// Exactness: a row's output and input gradient never depend on where or with which rows it is computed (the
// GEMMs' fixed reduction order), so forward, losses and activation gradients are bitwise those of resident
// training. An expert's weight gradient is bitwise too when all its rows are one piece in one partition; when
// they are split (LLEP spills, greedy splits, n > 1) its partial sums are added in a different order: within
// 1e-6 relative.
//
// Memory reuse (pipeline/memory_reuse.h): without it a device keeps this layer's rows of dispatched input,
// hidden and output until backward. With it, the forward pass runs through two partition slots shared by all
// layers of the device; backward restores the dispatched input by offloading it to the host (S1, S3) or
// sending it again (S2, S4), and the hidden activation by offloading (S1, S2) or recomputing it (S3, S4).
// With n = 1 there is nothing to share: reuse is off.
#pragma once
#include <vector>

#include "devices/device_group.h"
#include "devices/job_graph.h"
#include "model/ffn.h"
#include "offload/expert_access.h"
#include "pipeline/granularity_search.h"
#include "telemetry/step_record.h"

namespace moe {

class DeviceExperts {
 public:
  DeviceExperts(DeviceGroup& group, const FfnShape& expert, int experts, int layer);

  // Expert e's rows are xs[offsets[e], offsets[e] + rows[e]) of the layer's slot order ([S, C] on the host
  // side); ys gets the experts' outputs in the same rows. tokens: the layer's token count B (Algorithm 1's key).
  void forward(ExpertAccess& experts, const std::vector<int32_t>& offsets, const std::vector<int32_t>& rows,
               const float* xs, float* ys, int64_t tokens);
  // dys, xs [S, C] as in forward; dxs gets the rows' input gradients (every row written).
  void backward(Backend& main, ExpertAccess& experts, const float* dys, const float* xs, float* dxs);

  // What the layer did since the last call (summed over micro-batches), then starts afresh.
  LayerPlacement take_record();

 private:
  struct Chunk {
    int piece;
    int64_t slot_row;  // first row in xs / ys
    int64_t dev_row;   // first row among the device's rows (saved activations, host copies)
    int64_t part_row;  // first row within its partition (slots)
    int rows;
  };
  struct DeviceRows {
    std::vector<std::vector<Chunk>> parts;  // [n]
    std::vector<int64_t> part_rows;         // [n]
    int64_t rows = 0, max_part_rows = 0, max_chunk_rows = 0;
    DeviceBuffer x, h, act, y;              // this layer's saved activations without reuse
    DeviceBuffer host_x, host_h, host_act;  // offloaded activations under reuse
    std::vector<DeviceBuffer> guest_weights, local_grads;  // reused step to step, k-th guest piece uses k-th
  };
  struct PieceParams {
    FfnParams w, g;          // where the device reads weights and accumulates gradients
    FfnParams home_w, home_g;
    bool guest = false;      // weights copied to a device other than the home
    bool local_grad = false; // gradient accumulated in the device's buffer, then sent home
    bool primary = false;    // the piece whose buffer starts from the home gradient (the others start at 0)
  };
  struct PassStats {
    std::vector<double> busy_ms;
    double critical_ms = 0, wall_ms = 0;
    int64_t token_bytes = 0, weight_bytes = 0, offload_bytes = 0;
  };

  int choose_partitions(int64_t tokens);
  ReuseStrategy choose_strategy_for(int n);
  void lay_out(int n);
  void bind_forward_params(ExpertAccess& experts);
  PassStats run_forward(int n, ReuseStrategy strategy);
  PassStats run_backward(Backend& main, ReuseStrategy strategy);
  PassStats run_graphs(std::vector<JobGraph>& graphs);
  // Partition p's rows between the layer's [S, C] rows and a device buffer (its two partition slots, or else its
  // place among the device's rows): dispatch (to_device) or return; the bytes count as token traffic.
  int add_row_copies(JobGraph& g, Backend& be, DeviceRows& r, int p, const float* from, float* to, bool to_device,
                     bool slots, std::vector<int> deps, int64_t& token_bytes) const;
  // Partition p's activations that the strategy offloads, between its slots and the host (to_host: after the
  // forward compute; else restored before backward). Returns the job, or -1 when the strategy offloads nothing.
  int add_host_copies(JobGraph& g, Backend& be, DeviceRows& r, int p, ReuseStrategy strategy, float* X, float* H,
                      float* A, bool to_host, std::vector<int> deps) const;
  LayerSizes layer_sizes(int n) const;  // Table I's sizes for this step's busiest device at n partitions
  double predicted_ms(int n, ReuseStrategy strategy) const;
  void add_to_record(const PassStats& s);
  ExpertCostModel cost_model() const;
  size_t param_floats(const FfnParams& like) const;

  DeviceGroup& group_;
  FfnShape shape_;
  int E_, layer_;
  GranularitySearch search_;
  std::vector<std::pair<int, ReuseStrategy>> strategy_by_n_;

  // This step's decision and state between forward and backward.
  Placement placement_;
  std::vector<PieceParams> params_;
  std::vector<DeviceRows> dev_;
  std::vector<int32_t> offsets_;
  const float *xs_ = nullptr, *dys_ = nullptr;
  float *ys_ = nullptr, *dxs_ = nullptr;
  int n_ = 1;
  ReuseStrategy strategy_ = ReuseStrategy::None;

  LayerPlacement record_;
  bool recorded_ = false;
};

}  // namespace moe
