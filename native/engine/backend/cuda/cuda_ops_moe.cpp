// The CUDA backend's MoE and optimizer ops. The router's losses and Σx² come back to the host as the contract
// returns them; the dispatch plan is built on the host with the CPU's counting sort (it is host data by
// contract) and its index arrays are uploaded for the row moves.
#include <vector>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/router.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime.h"

namespace moe {

using cuda::cuda_check;
using cuda::Stage;
using cuda::sz;

namespace {

cuda::PlanView plan_view(Stage& st, const DispatchPlan& plan) {
  return {plan.N, plan.K, plan.total_slots(), st.upload(plan.slot_token), st.upload(plan.assign_slot)};
}

}  // namespace

RouterLosses CudaBackend::router_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int N,
                                         int E, int K, const RouterSpec& spec, const int32_t* forced_topk) {
  cpu::check_router_args(N, E, K, spec);
  if (N == 0) return {0.0f, 0.0f};
  Stage st(stream_, __func__);
  RouterSpec s = spec;
  s.selection_bias = st.in(spec.selection_bias, sz(E));
  double* sums = st.temp<double>(2 * sz(E) + 1);
  cuda::router_forward(stream_, st.out(probs, sz(N, E)), st.out(topk_idx, sz(N, K)), st.out(topk_w, sz(N, K)),
                       st.in(logits, sz(N, E)), N, E, K, s, st.in(forced_topk, sz(N, K)), st.temp<float>(sz(N, E)),
                       {sums, sums + E, sums + 2 * E});
  std::vector<double> host(2 * sz(E) + 1);
  cuda_check(cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(double), cudaMemcpyDeviceToHost, stream_),
             "router losses");
  st.finish();
  double aux = 0.0;
  for (int e = 0; e < E; ++e) aux += (host[E + e] / ((double)N * K)) * (host[e] / N);
  return {(float)(E * aux), (float)(host[2 * E] / N)};
}

void CudaBackend::router_backward(float* dlogits, const float* dtopk_w, const float* probs, const int32_t* topk_idx,
                                  const float* topk_w, const float* logits, int N, int E, int K,
                                  const RouterSpec& spec, float aux_scale, float z_scale) {
  cpu::check_router_args(N, E, K, spec);
  if (!dlogits || N == 0) return;
  Stage st(stream_, __func__);
  cuda::router_backward(stream_, st.inout(dlogits, sz(N, E)), st.in(dtopk_w, sz(N, K)), st.in(probs, sz(N, E)),
                        st.in(topk_idx, sz(N, K)), st.in(topk_w, sz(N, K)), st.in(logits, sz(N, E)), N, E, K, spec,
                        aux_scale, z_scale, st.temp<float>(sz(E)));
  st.finish();
}

void CudaBackend::dispatch_plan(DispatchPlan& plan, const int32_t* topk_idx, int N, int E, int K, int capacity) {
  std::vector<int32_t> idx(sz(N, K));
  if (!idx.empty()) copy(idx.data(), topk_idx, idx.size() * sizeof(int32_t));
  cpu::dispatch_plan(plan, idx.data(), N, E, K, capacity);
}

void CudaBackend::permute_forward(float* xs, const float* x, const DispatchPlan& plan, int C) {
  Stage st(stream_, __func__);
  const cuda::PlanView v = plan_view(st, plan);
  cuda::permute_forward(stream_, st.out(xs, sz(v.S, C)), st.in(x, sz(v.N, C)), v, C);
  st.finish();
}

void CudaBackend::permute_backward(float* dx, const float* dxs, const DispatchPlan& plan, int C) {
  Stage st(stream_, __func__);
  const cuda::PlanView v = plan_view(st, plan);
  cuda::permute_backward(stream_, st.inout(dx, sz(v.N, C)), st.in(dxs, sz(v.S, C)), v, C);
  st.finish();
}

void CudaBackend::combine_forward(float* y, const float* ys, const float* topk_w, const DispatchPlan& plan, int C) {
  Stage st(stream_, __func__);
  const cuda::PlanView v = plan_view(st, plan);
  cuda::combine_forward(stream_, st.out(y, sz(v.N, C)), st.in(ys, sz(v.S, C)), st.in(topk_w, sz(v.N, v.K)), v, C);
  st.finish();
}

void CudaBackend::combine_backward(float* dys, float* dtopk_w, const float* dy, const float* ys, const float* topk_w,
                                   const DispatchPlan& plan, int C) {
  if (!dys && !dtopk_w) return;
  Stage st(stream_, __func__);
  const cuda::PlanView v = plan_view(st, plan);
  cuda::combine_backward(stream_, st.inout(dys, sz(v.S, C)), st.inout(dtopk_w, sz(v.N, v.K)), st.in(dy, sz(v.N, C)),
                         st.in(ys, sz(v.S, C)), st.in(topk_w, sz(v.N, v.K)), v, C);
  st.finish();
}

void CudaBackend::adamw_update(float* p, const float* grad, float* m, float* v, int64_t n, const AdamWParams& hp) {
  Stage st(stream_, __func__);
  cuda::adamw_update(stream_, st.inout(p, sz(n)), st.in(grad, sz(n)), st.inout(m, sz(n)), st.inout(v, sz(n)), n, hp);
  st.finish();
}

double CudaBackend::sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  Stage st(stream_, __func__);
  double* out = st.temp<double>(1);
  cuda::sum_squares(stream_, out, st.temp<double>(sz(cuda::sum_squares_chunks(n))), st.in(x, sz(n)), n);
  double result = 0.0;
  cuda_check(cudaMemcpyAsync(&result, out, sizeof(double), cudaMemcpyDeviceToHost, stream_), "sum_squares");
  st.finish();
  return result;
}

}  // namespace moe
