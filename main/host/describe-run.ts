// Short human descriptions of a run config for lists and tables ("mixtral L4 d256 8x top-2").
import type { RunConfig } from '../api/config'

export function describeModel(config: RunConfig): string {
  const m = config.model
  const experts = Array.isArray(m.n_experts) ? `${m.n_experts.join('/')}x` : `${m.n_experts}x`
  const extras = [
    m.shared_expert_d_ff > 0 ? '+shared' : '',
    m.residual_mlp ? '+residual' : '',
    m.moe_every > 1 ? `moe every ${m.moe_every}` : '',
  ].filter(Boolean)
  return [m.arch, `L${m.n_layers}`, `d${m.d_model}`, experts, `top-${m.top_k}`, ...extras].join(' ')
}

// The config has no offload/placement knobs yet, so the strategy is how experts get their tokens and
// how much CPU the engine uses.
export function describeStrategy(config: RunConfig): string {
  const cf = config.model.capacity_factor
  const routing = cf === null ? 'dropless' : `capacity ${cf}`
  const t = config.train
  const threads = `${t.threads} thread${t.threads === 1 ? '' : 's'}`
  return ['resident', routing, threads, t.grad_accum > 1 ? `accum ${t.grad_accum}` : ''].filter(Boolean).join(' · ')
}
