// Pre-flight memory plan of a run: bytes per tier (parameters, gradients, AdamW moments, saved
// activations, backward scratch) for the config, mirroring the engine's allocations, and whether it fits.
// Today every byte is resident on the device (on the CPU backend, host memory stands in for it);
// host and SSD tiers join when expert offload lands, so they are reported empty.
import type { RunConfig } from '../../api/config'
import type { Plan } from '../../api/contract'
import { countParams } from './param-count'

const F32 = 4

function activationFloats(c: RunConfig): { saved: number; scratch: number } {
  const m = c.model
  const N = c.train.batch_size * c.train.seq_len, C = m.d_model, V = m.vocab_size
  const kv = m.n_kv_heads ?? m.n_heads
  const Q = (m.n_heads + 2 * kv) * (C / m.n_heads)
  const swiglu = m.arch === 'mixtral'
  const inRows = (F: number) => (swiglu ? 2 * F : F)
  const ffn = (rows: number, F: number) => rows * (inRows(F) + F)
  const experts = Array.isArray(m.n_experts) ? m.n_experts : null
  const expertWidth = m.expert_d_ff ?? m.d_ff
  let saved = N * C // embedding output
  let scratchRows = N
  let moeIndex = 0
  for (let l = 0; l < m.n_layers; l++) {
    saved += 6 * N * C + 4 * N + N * Q * (swiglu ? 2 : 1) + N * m.n_heads
    if ((l + 1) % m.moe_every !== 0) {
      saved += ffn(N, m.d_ff)
      continue
    }
    const E = experts ? experts[moeIndex]! : (m.n_experts as number)
    moeIndex++
    const K = m.top_k
    const S = m.capacity_factor === null ? N * K : E * Math.ceil((m.capacity_factor * N * K) / E)
    scratchRows = Math.max(scratchRows, S)
    saved += 2 * N * E + 2 * N * K + 2 * S * C + ffn(S, expertWidth)
    if (m.shared_expert_d_ff > 0) saved += ffn(N, m.shared_expert_d_ff) + N * C + (m.shared_expert_gate ? N * C + N : 0)
    if (m.residual_mlp) saved += ffn(N, m.d_ff) + N * C
  }
  saved += N * C + 3 * N + N * V // final norm, losses, logits
  const widest = Math.max(inRows(expertWidth), inRows(m.d_ff), inRows(m.shared_expert_d_ff))
  const scratch = N * V + 3 * N * C + 2 * N * Q + 2 * scratchRows * C + scratchRows * (widest + widest / (swiglu ? 2 : 1))
  return { saved, scratch }
}

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(2)} GiB`

export function planRun(config: RunConfig, budgets: { device: number; host: number }): Plan {
  const counts = countParams(config.model)
  const { saved, scratch } = activationFloats(config)
  const device = {
    tier: 'device' as const,
    params: counts.total * F32,
    grads: counts.total * F32,
    optimizer: 2 * counts.total * F32,
    activations: saved * F32,
    buffers: scratch * F32,
    total: 0,
    budget: budgets.device,
  }
  device.total = device.params + device.grads + device.optimizer + device.activations + device.buffers
  const empty = (tier: 'host' | 'ssd', budget: number | null) =>
    ({ tier, params: 0, grads: 0, optimizer: 0, activations: 0, buffers: 0, total: 0, budget })
  const fits = device.total <= budgets.device
  return {
    mode: 'none',
    fits,
    tiers: [device, empty('host', budgets.host), empty('ssd', null)],
    paramCount: counts.total,
    expertParamCount: counts.experts,
    explanation: fits
      ? `resident: all ${gib(device.total)} fit in the device budget of ${gib(budgets.device)}`
      : `needs ${gib(device.total)} on the device but the budget is ${gib(budgets.device)}: a device budget of at least ` +
        `${gib(device.total)}, a smaller batch or sequence (activations are ${gib(device.activations)}), or fewer ` +
        `experts (${gib(counts.experts * 4 * F32)} of expert state) would fit`,
  }
}
