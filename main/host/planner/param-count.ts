// Parameter counts of a run config, tensor for tensor as the engine lays them out (docs/model.md):
// the dense part, which always lives on the device, and one expert's state, which offload may move.
import type { ModelConfig } from '../../api/config'

export interface ParamCounts {
  dense: number
  perExpert: number[]  // [MoE layer] parameters of one expert of that layer
  experts: number      // all experts of all layers
  total: number
}

function ffnParams(m: ModelConfig, width: number): number {
  const C = m.d_model
  return m.arch === 'gpt-moe' ? 2 * width * C + width + C : 3 * width * C
}

export function countParams(m: ModelConfig): ParamCounts {
  const C = m.d_model, V = m.vocab_size
  const kv = m.n_kv_heads ?? m.n_heads
  const qkvRows = (m.n_heads + 2 * kv) * (C / m.n_heads)
  const bias = m.arch === 'gpt-moe'
  const qkvBias = m.qkv_bias ?? bias
  const norm = bias ? 2 * C : C
  const tie = m.tie_embeddings ?? m.arch === 'gpt-moe'
  const expertWidth = m.expert_d_ff ?? m.d_ff
  const experts = Array.isArray(m.n_experts) ? m.n_experts : null

  let dense = V * C + (m.arch === 'gpt-moe' ? m.max_seq_len * C : 0) + norm + (tie ? 0 : V * C)
  const perExpert: number[] = []
  let expertTotal = 0
  for (let l = 0; l < m.n_layers; l++) {
    dense += 2 * norm + qkvRows * C + (qkvBias ? qkvRows : 0) + C * C + (bias ? C : 0)
    if ((l + 1) % m.moe_every !== 0) {
      dense += ffnParams(m, m.d_ff)
      continue
    }
    const E = experts ? experts[perExpert.length]! : (m.n_experts as number)
    dense += E * C
    if (m.shared_expert_d_ff > 0) dense += ffnParams(m, m.shared_expert_d_ff) + (m.shared_expert_gate ? C : 0)
    if (m.residual_mlp) dense += ffnParams(m, m.d_ff)
    const one = ffnParams(m, expertWidth)
    perExpert.push(one)
    expertTotal += E * one
  }
  return { dense, perExpert, experts: expertTotal, total: dense + expertTotal }
}
