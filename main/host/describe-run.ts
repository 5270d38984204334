// Short human descriptions of a run config for lists and tables ("mixtral L4 d256 8x top-2").
import { pipelineEngaged, type RunConfig } from '../api/config'
import type { ResolvedOffload } from '../api/contract'

export function describeModel(config: RunConfig): string {
  const m = config.model
  const experts = Array.isArray(m.n_experts) ? `${m.n_experts.join('/')}x` : `${m.n_experts}x`
  const extras = [
    m.shared_expert_d_ff > 0 ? '+shared' : '',
    m.residual_mlp ? '+residual' : '',
    m.moe_every > 1 ? `moe every ${m.moe_every}` : '',
    m.dense_layers?.length ? `dense ${m.dense_layers.join(',')}` : '',
  ].filter(Boolean)
  return [m.arch, `L${m.n_layers}`, `d${m.d_model}`, experts, `top-${m.top_k}`, ...extras].join(' ')
}

// Where expert state lives (as the host resolved it), how experts get their tokens, where they would run
// (placement across devices, recorded per step), how their phase is pipelined and how much CPU the engine uses:
// "resident · dropless · least-loaded on 4 devices · pipelined n=4 reuse S2 · 2 threads".
export function describeStrategy(config: RunConfig, offload: ResolvedOffload | null = null): string {
  const cf = config.model.capacity_factor
  const routing = cf === null ? 'dropless' : `capacity ${cf}`
  const t = config.train
  const threads = `${t.threads} thread${t.threads === 1 ? '' : 's'}`
  const where = !offload || offload.mode === 'none'
    ? ['resident']
    : [`${offload.mode} offload`, offload.slots !== null ? `${offload.slots} slots` : '', config.offload?.optimizer === 'delayed' ? 'one-step stale' : '']
  const p = config.placement
  const placed = p && p.devices > 1 ? `${p.policy} on ${p.devices} devices` : ''
  const q = config.pipeline
  const piped = q && pipelineEngaged(q) ? `pipelined n=${q.partitions}${q.memory_reuse !== 'off' ? ` reuse ${q.memory_reuse}` : ''}` : ''
  return [...where, routing, placed, piped, threads, t.grad_accum > 1 ? `accum ${t.grad_accum}` : ''].filter(Boolean).join(' · ')
}
