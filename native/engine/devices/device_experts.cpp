#include "devices/device_experts.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace moe {
namespace {

constexpr int64_t kF = sizeof(float);

// The arrays of one expert's parameters (or gradient), in the order a device buffer packs them.
struct ParamArrays {
  size_t in, out, b_in, b_out, in_bf16, out_bf16;  // element counts; 0 when absent
  size_t floats() const { return in + out + b_in + b_out + (in_bf16 + 1) / 2 + (out_bf16 + 1) / 2; }
};

ParamArrays arrays_of(const FfnShape& s, const FfnParams& like) {
  const size_t in = size_t(s.in_rows()) * s.C, out = size_t(s.C) * s.F;
  return {in, out, like.b_in ? size_t(s.in_rows()) : 0, like.b_out ? size_t(s.C) : 0, like.w_in_bf16 ? in : 0,
          like.w_out_bf16 ? out : 0};
}

FfnParams bind(float* base, const ParamArrays& a) {
  FfnParams p;
  p.w_in = base;
  p.w_out = base + a.in;
  float* next = p.w_out + a.out;
  if (a.b_in) p.b_in = next, next += a.b_in;
  if (a.b_out) p.b_out = next, next += a.b_out;
  if (a.in_bf16) p.w_in_bf16 = reinterpret_cast<const uint16_t*>(next), next += (a.in_bf16 + 1) / 2;
  if (a.out_bf16) p.w_out_bf16 = reinterpret_cast<const uint16_t*>(next);
  return p;
}

// Copies src's arrays into dst's; returns the bytes moved.
int64_t copy_params(Backend& be, const FfnParams& dst, const FfnParams& src, const ParamArrays& a) {
  be.copy(dst.w_in, src.w_in, a.in * kF);
  be.copy(dst.w_out, src.w_out, a.out * kF);
  if (a.b_in) be.copy(dst.b_in, src.b_in, a.b_in * kF);
  if (a.b_out) be.copy(dst.b_out, src.b_out, a.b_out * kF);
  if (a.in_bf16) be.copy(const_cast<uint16_t*>(dst.w_in_bf16), src.w_in_bf16, a.in_bf16 * 2);
  if (a.out_bf16) be.copy(const_cast<uint16_t*>(dst.w_out_bf16), src.w_out_bf16, a.out_bf16 * 2);
  return int64_t(a.in + a.out + a.b_in + a.b_out) * kF + int64_t(a.in_bf16 + a.out_bf16) * 2;
}

void zero_grads(Backend& be, const FfnParams& g, const ParamArrays& a) {
  be.zero(g.w_in, a.in * kF);
  be.zero(g.w_out, a.out * kF);
  if (a.b_in) be.zero(g.b_in, a.b_in * kF);
  if (a.b_out) be.zero(g.b_out, a.b_out * kF);
}

int64_t accumulate_grads(Backend& be, const FfnParams& home, const FfnParams& local, const ParamArrays& a) {
  be.accumulate(home.w_in, local.w_in, int64_t(a.in));
  be.accumulate(home.w_out, local.w_out, int64_t(a.out));
  if (a.b_in) be.accumulate(home.b_in, local.b_in, int64_t(a.b_in));
  if (a.b_out) be.accumulate(home.b_out, local.b_out, int64_t(a.b_out));
  return int64_t(a.in + a.out + a.b_in + a.b_out) * kF;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double max_over_mean(const std::vector<int64_t>& load) {
  int64_t total = 0, top = 0;
  for (int64_t l : load) total += l, top = std::max(top, l);
  return total == 0 ? 1.0 : double(top) * double(load.size()) / double(total);
}

bool offloads_input(ReuseStrategy s) { return s == ReuseStrategy::S1 || s == ReuseStrategy::S3; }
bool resends_input(ReuseStrategy s) { return s == ReuseStrategy::S2 || s == ReuseStrategy::S4; }
bool offloads_hidden(ReuseStrategy s) { return s == ReuseStrategy::S1 || s == ReuseStrategy::S2; }
bool recomputes_hidden(ReuseStrategy s) { return s == ReuseStrategy::S3 || s == ReuseStrategy::S4; }

}  // namespace

DeviceExperts::DeviceExperts(DeviceGroup& group, const FfnShape& expert, int experts, int layer)
    : group_(group),
      shape_(expert),
      E_(experts),
      layer_(layer),
      search_([this](int64_t) {
        return best_granularity(group_.pipeline().candidates, [this](int n) {
          return run_forward(n, choose_strategy_for(n)).critical_ms;
        });
      }),
      dev_(group.size()) {}

ExpertCostModel DeviceExperts::cost_model() const {
  const MeasuredSpeeds& s = group_.speeds();
  ExpertCostModel cost;
  if (!s.known()) return cost;  // the first step balances tokens
  const double flop_per_row = 2.0 * shape_.C * (shape_.in_rows() + shape_.F);
  cost.compute_ms_per_token = std::max(1e-9, flop_per_row / s.flop_per_ms);
  const double weight_bytes = double(size_t(shape_.C) * (shape_.in_rows() + shape_.F)) * kF;
  cost.upload_ms_per_expert = weight_bytes / s.comm_bytes_per_ms;
  return cost;
}

int DeviceExperts::choose_partitions(int64_t tokens) {
  const int n = group_.pipeline().partitions;
  return n > 0 ? n : search_.choose(std::max<int64_t>(tokens, 1));
}

ReuseStrategy DeviceExperts::choose_strategy_for(int n) {
  const PipelineConfig& cfg = group_.pipeline();
  if (n < 2) return ReuseStrategy::None;
  if (!cfg.reuse_auto) return cfg.memory_reuse;
  for (const auto& [m, s] : strategy_by_n_)
    if (m == n) return s;
  // Equation 10 needs this machine's speeds: a pass without reuse measures them.
  if (!group_.speeds().known()) run_forward(n, ReuseStrategy::None);
  LayerSizes sizes = layer_sizes(n);
  sizes.B = std::max<int64_t>(sizes.B, n);
  const ReuseStrategy s = choose_strategy(group_.speeds().stream_speeds(), sizes);
  strategy_by_n_.emplace_back(n, s);
  return s;
}

LayerSizes DeviceExperts::layer_sizes(int n) const {
  LayerSizes sizes;
  for (const DeviceRows& r : dev_) sizes.B = std::max(sizes.B, r.rows);  // equation 10 is per device: the busiest
  sizes.M = shape_.C;
  sizes.H = shape_.F;
  sizes.E = E_;
  sizes.n = n;
  return sizes;
}

double DeviceExperts::predicted_ms(int n, ReuseStrategy strategy) const {
  if (n < 2 || !group_.speeds().known()) return 0;
  const LayerSizes sizes = layer_sizes(n);
  if (sizes.B < n) return 0;
  const ReuseCost c = reuse_costs(group_.speeds().stream_speeds(), sizes)[int(strategy)];
  return c.forward_ms + c.backward_ms;
}

void DeviceExperts::lay_out(int n) {
  for (DeviceRows& r : dev_) {
    r.parts.assign(n, {});
    r.part_rows.assign(n, 0);
    r.rows = r.max_part_rows = r.max_chunk_rows = 0;
  }
  std::vector<int64_t> dev_row(dev_.size(), 0);
  for (size_t i = 0; i < placement_.pieces.size(); ++i) {
    const ExpertPiece& piece = placement_.pieces[i];
    DeviceRows& r = dev_[piece.device];
    for (int p = 0; p < n; ++p) {
      const int lo = int(int64_t(piece.count) * p / n), hi = int(int64_t(piece.count) * (p + 1) / n);
      if (hi == lo) continue;
      r.parts[p].push_back({int(i), int64_t(offsets_[piece.expert]) + piece.begin + lo, dev_row[piece.device] + lo,
                            r.part_rows[p], hi - lo});
      r.part_rows[p] += hi - lo;
      r.max_chunk_rows = std::max<int64_t>(r.max_chunk_rows, hi - lo);
    }
    dev_row[piece.device] += piece.count;
    r.rows += piece.count;
  }
  for (DeviceRows& r : dev_)
    for (int64_t rows : r.part_rows) r.max_part_rows = std::max(r.max_part_rows, rows);
}

void DeviceExperts::bind_forward_params(ExpertAccess& experts) {
  params_.assign(placement_.pieces.size(), {});
  std::vector<int> guests(dev_.size(), 0);
  std::vector<FfnParams> home(E_);
  std::vector<bool> fetched(E_, false);
  for (size_t i = 0; i < placement_.pieces.size(); ++i) {
    const ExpertPiece& piece = placement_.pieces[i];
    if (!fetched[piece.expert]) home[piece.expert] = experts.weights(layer_, piece.expert), fetched[piece.expert] = true;
    PieceParams& pp = params_[i];
    pp.home_w = pp.w = home[piece.expert];
    pp.guest = piece.device != placement_.home[piece.expert];
    if (!pp.guest) continue;
    DeviceRows& r = dev_[piece.device];
    const int k = guests[piece.device]++;
    if (int(r.guest_weights.size()) <= k) r.guest_weights.resize(k + 1);
    const ParamArrays a = arrays_of(shape_, pp.home_w);
    pp.w = bind(group_.device(piece.device).reserve(r.guest_weights[k], a.floats()), a);
  }
}

DeviceExperts::PassStats DeviceExperts::run_graphs(std::vector<JobGraph>& graphs) {
  PassStats s;
  s.busy_ms.assign(graphs.size(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t d = 0; d < graphs.size(); ++d) graphs[d].start(group_.device(int(d)).workers(), group_.thread_time());
  for (JobGraph& g : graphs) g.finish();
  s.wall_ms = ms_since(t0);
  MeasuredSpeeds& speeds = group_.speeds();
  for (size_t d = 0; d < graphs.size(); ++d) {
    const JobGraph& g = graphs[d];
    s.busy_ms[d] = g.busy_ms();
    s.critical_ms = std::max(s.critical_ms, g.makespan());
    speeds.add_compute(g.work(Stream::Compute), g.busy_ms(Stream::Compute));
    speeds.add_comm(g.work(Stream::Comm), g.busy_ms(Stream::Comm));
    speeds.add_mem(g.work(Stream::Mem), g.busy_ms(Stream::Mem));
    s.offload_bytes += int64_t(g.work(Stream::Mem));
  }
  return s;
}

int DeviceExperts::add_row_copies(JobGraph& g, Backend& be, DeviceRows& r, int p, const float* from, float* to,
                                  bool to_device, bool slots, std::vector<int> deps, int64_t& token_bytes) const {
  const int64_t C = shape_.C, slot = r.max_part_rows;
  const double bytes = double(r.part_rows[p] * C * kF);
  token_bytes += int64_t(bytes);
  return g.add(Stream::Comm, bytes, [&be, &r, p, from, to, to_device, slots, C, slot] {
    for (const Chunk& c : r.parts[p]) {
      const int64_t on_device = (slots ? (p % 2) * slot + c.part_row : c.dev_row) * C, in_layer = c.slot_row * C;
      be.copy(to + (to_device ? on_device : in_layer), from + (to_device ? in_layer : on_device), c.rows * C * kF);
    }
  }, std::move(deps));
}

int DeviceExperts::add_host_copies(JobGraph& g, Backend& be, DeviceRows& r, int p, ReuseStrategy strategy, float* X,
                                   float* H, float* A, bool to_host, std::vector<int> deps) const {
  const bool input = offloads_input(strategy), hidden = offloads_hidden(strategy);
  if (!input && !hidden) return -1;
  const int64_t C = shape_.C, IR = shape_.in_rows(), F = shape_.F, slot = r.max_part_rows;
  const double bytes = double(r.part_rows[p] * ((input ? C : 0) + (hidden ? IR + F : 0)) * kF);
  return g.add(Stream::Mem, bytes, [&be, &r, p, X, H, A, C, IR, F, slot, input, hidden, to_host] {
    auto move = [&](float* device, DeviceBuffer& host, int64_t width, const Chunk& c) {
      float* on_device = device + ((p % 2) * slot + c.part_row) * width;
      float* on_host = host.f() + c.dev_row * width;
      be.copy(to_host ? on_host : on_device, to_host ? on_device : on_host, c.rows * width * kF);
    };
    for (const Chunk& c : r.parts[p]) {
      if (input) move(X, r.host_x, C, c);
      if (hidden) move(H, r.host_h, IR, c), move(A, r.host_act, F, c);
    }
  }, std::move(deps));
}

DeviceExperts::PassStats DeviceExperts::run_forward(int n, ReuseStrategy strategy) {
  lay_out(n);
  const bool reuse = strategy != ReuseStrategy::None;
  const int64_t C = shape_.C, IR = shape_.in_rows(), F = shape_.F;
  const double flop_per_row = 2.0 * C * (IR + F);
  int64_t token_bytes = 0, weight_bytes = 0;
  std::vector<JobGraph> graphs(dev_.size());
  for (size_t d = 0; d < dev_.size(); ++d) {
    DeviceRows& r = dev_[d];
    if (r.rows == 0) continue;
    VirtualDevice& dev = group_.device(int(d));
    Backend& be = dev.backend();
    DeviceScratch& sc = group_.scratch(int(d));
    const int64_t slot = r.max_part_rows;
    float *X, *H, *A, *Y;
    if (reuse) {
      X = dev.reserve(sc.x, 2 * slot * C), H = dev.reserve(sc.h, 2 * slot * IR);
      A = dev.reserve(sc.act, 2 * slot * F), Y = dev.reserve(sc.y, 2 * slot * C);
      if (offloads_input(strategy)) dev.reserve_host(r.host_x, r.rows * C);
      if (offloads_hidden(strategy)) dev.reserve_host(r.host_h, r.rows * IR), dev.reserve_host(r.host_act, r.rows * F);
    } else {
      X = dev.reserve(r.x, r.rows * C), H = dev.reserve(r.h, r.rows * IR);
      A = dev.reserve(r.act, r.rows * F), Y = dev.reserve(r.y, r.rows * C);
    }
    // A chunk's rows in a buffer of `width` floats per row: its partition slot, or its place among the device's rows.
    auto at = [reuse, slot](float* base, int64_t width, int p, const Chunk& c) {
      return base + (reuse ? (p % 2) * slot + c.part_row : c.dev_row) * width;
    };
    JobGraph& g = graphs[d];
    int weights = -1;
    std::vector<int> guests;
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].guest && placement_.pieces[i].device == int(d)) guests.push_back(int(i));
    if (!guests.empty()) {
      int64_t guest_bytes = 0;
      for (int i : guests) guest_bytes += int64_t(arrays_of(shape_, params_[i].home_w).floats()) * kF;
      weights = g.add(Stream::Comm, double(guest_bytes), [this, &be, guests] {
        for (int i : guests) copy_params(be, params_[i].w, params_[i].home_w, arrays_of(shape_, params_[i].home_w));
      });
      weight_bytes += guest_bytes;
    }
    std::vector<int> in(n), compute(n), out(n), offload(n, -1);
    const float* xs = xs_;
    float* ys = ys_;
    auto add_in = [&, X](int p) {
      std::vector<int> deps;
      if (reuse && p >= 2) {
        deps.push_back(compute[p - 2]);
        if (offload[p - 2] >= 0) deps.push_back(offload[p - 2]);
      }
      in[p] = add_row_copies(g, be, r, p, xs, X, true, reuse, deps, token_bytes);
    };
    add_in(0);
    for (int p = 0; p < n; ++p) {
      if (p + 1 < n) add_in(p + 1);
      std::vector<int> deps{in[p]};
      if (weights >= 0) deps.push_back(weights);
      if (reuse && p >= 2) deps.push_back(out[p - 2]);
      compute[p] = g.add(Stream::Compute, flop_per_row * r.part_rows[p], [this, &be, &r, p, X, H, A, Y, C, IR, F, at] {
        for (const Chunk& c : r.parts[p])
          ffn_forward(be, params_[c.piece].w, shape_, at(Y, C, p, c), at(X, C, p, c), at(H, IR, p, c), at(A, F, p, c),
                      c.rows);
      }, deps);
      out[p] = add_row_copies(g, be, r, p, Y, ys, false, reuse, {compute[p]}, token_bytes);
      offload[p] = add_host_copies(g, be, r, p, strategy, X, H, A, true, {compute[p]});
    }
  }
  PassStats s = run_graphs(graphs);
  s.token_bytes = token_bytes;
  s.weight_bytes = weight_bytes;
  return s;
}

DeviceExperts::PassStats DeviceExperts::run_backward(Backend& main, ReuseStrategy strategy) {
  const int n = n_;
  const bool reuse = strategy != ReuseStrategy::None;
  const int64_t C = shape_.C, IR = shape_.in_rows(), F = shape_.F;
  const double flop_per_row = 4.0 * C * (IR + F) + (recomputes_hidden(strategy) ? 2.0 * C * IR : 0.0);
  int64_t token_bytes = 0, weight_bytes = 0;
  std::vector<JobGraph> graphs(dev_.size());
  for (size_t d = 0; d < dev_.size(); ++d) {
    DeviceRows& r = dev_[d];
    if (r.rows == 0) continue;
    VirtualDevice& dev = group_.device(int(d));
    Backend& be = dev.backend();
    DeviceScratch& sc = group_.scratch(int(d));
    const int64_t slot = r.max_part_rows;
    float* DY = dev.reserve(sc.dy, 2 * slot * C);
    float* DX = dev.reserve(sc.dx, 2 * slot * C);
    float* DH = dev.reserve(sc.dh, r.max_chunk_rows * IR);
    float* DA = dev.reserve(sc.dact, r.max_chunk_rows * F);
    float *X = r.x.f(), *H = r.h.f(), *A = r.act.f();
    if (reuse) X = sc.x.f(), H = sc.h.f(), A = sc.act.f();  // forward reserved both slots
    auto at = [slot](float* base, int64_t width, int p, const Chunk& c) { return base + ((p % 2) * slot + c.part_row) * width; };
    auto saved = [reuse, at](float* base, int64_t width, int p, const Chunk& c) {
      return reuse ? at(base, width, p, c) : base + c.dev_row * width;
    };
    JobGraph& g = graphs[d];
    // Guest gradient buffers: the primary starts from the home gradient, the others from zero.
    std::vector<int> locals;
    int64_t sent = 0;
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].local_grad && placement_.pieces[i].device == int(d)) {
        locals.push_back(int(i));
        if (params_[i].primary) sent += int64_t(arrays_of(shape_, params_[i].home_g).floats()) * kF;
      }
    int grads_ready = -1;
    if (!locals.empty()) {
      weight_bytes += sent;
      grads_ready = g.add(Stream::Comm, double(sent), [this, &be, locals] {
        for (int i : locals) {
          const ParamArrays a = arrays_of(shape_, params_[i].home_g);
          if (params_[i].primary) copy_params(be, params_[i].g, params_[i].home_g, a);
          else zero_grads(be, params_[i].g, a);
        }
      });
    }
    std::vector<std::vector<int>> ins(n);
    std::vector<int> compute(n), out(n);
    const float* dys_ptr = dys_;
    const float* xs = xs_;
    float* dxs = dxs_;
    auto add_in = [&](int p) {
      std::vector<int> deps;
      if (p >= 2) deps.push_back(compute[p - 2]);
      ins[p].push_back(add_row_copies(g, be, r, p, dys_ptr, DY, true, true, deps, token_bytes));
      if (resends_input(strategy)) ins[p].push_back(add_row_copies(g, be, r, p, xs, X, true, true, deps, token_bytes));
      if (const int restore = add_host_copies(g, be, r, p, strategy, X, H, A, false, deps); restore >= 0)
        ins[p].push_back(restore);
    };
    add_in(0);
    const bool recompute = recomputes_hidden(strategy);
    for (int p = 0; p < n; ++p) {
      if (p + 1 < n) add_in(p + 1);
      std::vector<int> deps = ins[p];
      if (grads_ready >= 0) deps.push_back(grads_ready);
      if (p >= 2) deps.push_back(out[p - 2]);
      compute[p] = g.add(Stream::Compute, flop_per_row * r.part_rows[p],
                         [this, &be, &r, p, X, H, A, DY, DX, DH, DA, C, IR, F, at, saved, recompute, slot] {
        be.zero(DX + (p % 2) * slot * C, r.part_rows[p] * C * kF);
        for (const Chunk& c : r.parts[p]) {
          const PieceParams& pp = params_[c.piece];
          float *x = saved(X, C, p, c), *h = saved(H, IR, p, c), *act = saved(A, F, p, c);
          if (recompute) ffn_hidden_forward(be, pp.w, shape_, x, h, act, c.rows);
          ffn_backward(be, pp.w, pp.g, shape_, at(DX, C, p, c), at(DY, C, p, c), x, h, act, DH, DA, c.rows);
        }
      }, deps);
      out[p] = add_row_copies(g, be, r, p, DX, dxs, false, true, {compute[p]}, token_bytes);
    }
  }
  PassStats s = run_graphs(graphs);
  // Guest gradients go home: the primary's replaces the home gradient it started from, the others add to it,
  // in piece order, so the sum is the same every run.
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < params_.size(); ++i) {
    const PieceParams& pp = params_[i];
    if (!pp.local_grad) continue;
    const ParamArrays a = arrays_of(shape_, pp.home_g);
    weight_bytes += pp.primary ? copy_params(main, pp.home_g, pp.g, a) : accumulate_grads(main, pp.home_g, pp.g, a);
  }
  const double gather_ms = ms_since(t0);
  s.critical_ms += gather_ms;
  s.wall_ms += gather_ms;
  s.token_bytes = token_bytes;
  s.weight_bytes = weight_bytes;
  return s;
}

void DeviceExperts::forward(ExpertAccess& experts, const std::vector<int32_t>& offsets, const std::vector<int32_t>& rows,
                            const float* xs, float* ys, int64_t tokens) {
  offsets_ = offsets;
  xs_ = xs;
  ys_ = ys;
  placement_ = place_experts(group_.placement(), rows, cost_model());
  std::vector<int> order;
  for (int e = 0; e < E_; ++e)
    if (rows[e] > 0) order.push_back(e);
  experts.plan(layer_, ExpertPass::Forward, order);
  bind_forward_params(experts);
  n_ = choose_partitions(tokens);
  strategy_ = choose_strategy_for(n_);
  const PassStats s = run_forward(n_, strategy_);
  add_to_record(s);
  LayerPlacement& r = record_;
  r.predicted_ms += predicted_ms(n_, strategy_);
  for (size_t d = 0; d < dev_.size(); ++d) {
    r.load_before[d] += placement_.load_before[d];
    r.load_after[d] += placement_.load_after[d];
  }
  r.imbalance_before = max_over_mean(r.load_before);
  r.imbalance_after = max_over_mean(r.load_after);
  r.spilled_tokens += placement_.spilled_tokens;
  r.moved_experts += placement_.moved_experts;
  r.expert_device.assign(E_, -1);
  r.expert_spilled.resize(E_, 0);  // summed over the step's micro-batches, as spilled_tokens
  for (const ExpertPiece& piece : placement_.pieces) {
    if (piece.begin == 0) r.expert_device[piece.expert] = piece.device;
    if (piece.device != placement_.home[piece.expert]) r.expert_spilled[piece.expert] += piece.count;
  }
  for (int e : order) experts.done_forward(layer_, e);
}

void DeviceExperts::backward(Backend& main, ExpertAccess& experts, const float* dys, const float* xs, float* dxs) {
  dys_ = dys;
  xs_ = xs;
  dxs_ = dxs;
  std::vector<bool> placed(E_, false);
  for (const ExpertPiece& piece : placement_.pieces) placed[piece.expert] = true;
  std::vector<int> order;
  for (int e = E_ - 1; e >= 0; --e)
    if (placed[e]) order.push_back(e);
  experts.plan(layer_, ExpertPass::Backward, order);
  std::vector<FfnParams> home_g(E_);
  for (int e : order) {
    experts.weights(layer_, e);
    home_g[e] = experts.grads(layer_, e);
  }
  // The piece on the expert's home device accumulates straight into its gradient; failing one, the first piece
  // is the primary and starts from it.
  std::vector<int> primary(E_, -1);
  for (size_t i = 0; i < placement_.pieces.size(); ++i) {
    const ExpertPiece& piece = placement_.pieces[i];
    if (piece.device == placement_.home[piece.expert]) primary[piece.expert] = int(i);
  }
  for (size_t i = 0; i < placement_.pieces.size(); ++i)
    if (primary[placement_.pieces[i].expert] < 0) primary[placement_.pieces[i].expert] = int(i);
  std::vector<int> locals(dev_.size(), 0);
  for (size_t i = 0; i < placement_.pieces.size(); ++i) {
    const ExpertPiece& piece = placement_.pieces[i];
    PieceParams& pp = params_[i];
    pp.home_g = pp.g = home_g[piece.expert];
    pp.primary = primary[piece.expert] == int(i);
    pp.local_grad = piece.device != placement_.home[piece.expert];
    if (!pp.local_grad) continue;
    DeviceRows& r = dev_[piece.device];
    const int k = locals[piece.device]++;
    if (int(r.local_grads.size()) <= k) r.local_grads.resize(k + 1);
    const ParamArrays a = arrays_of(shape_, pp.home_g);
    pp.g = bind(group_.device(piece.device).reserve(r.local_grads[k], a.floats()), a);
  }
  add_to_record(run_backward(main, strategy_));
  for (int e : order) experts.done_backward(layer_, e);
}

void DeviceExperts::add_to_record(const PassStats& s) {
  LayerPlacement& r = record_;
  const size_t D = dev_.size();
  if (!recorded_) {
    r = LayerPlacement{};
    r.load_before.assign(D, 0);
    r.load_after.assign(D, 0);
    r.device_busy_ms.assign(D, 0);
    recorded_ = true;
  }
  for (size_t d = 0; d < D; ++d) r.device_busy_ms[d] += s.busy_ms[d];
  r.critical_ms += s.critical_ms;
  r.wall_ms += s.wall_ms;
  r.token_bytes += s.token_bytes;
  r.weight_bytes += s.weight_bytes;
  r.offload_bytes += s.offload_bytes;
  r.partitions = n_;
  r.reuse_strategy = int(strategy_);
}

LayerPlacement DeviceExperts::take_record() {
  LayerPlacement r = std::move(record_);
  record_ = LayerPlacement{};
  recorded_ = false;
  return r;
}

}  // namespace moe
