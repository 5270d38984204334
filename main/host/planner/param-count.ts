// Parameter counts of a run config, tensor for tensor as the engine lays them out (docs/model.md,
// native/engine/model/params.cpp): the dense part, which always lives on the device, and each routed
// expert, which offload may move. The arena pads every tensor to a multiple of 16 floats (64-byte
// alignment), so byte bookings use the padded sizes while the counts are the tensors' own.
import type { ModelConfig } from '../../api/config'

export interface ParamCounts {
  dense: number
  perExpert: number[]  // [MoE layer] parameters of one expert of that layer
  experts: number      // all experts of all layers
  total: number
  /** Padded floats, as the engine's arena holds them. */
  padded: { dense: number; perExpert: number[]; experts: number; total: number }
  /** [MoE layer] routed experts of that layer. */
  expertsPerLayer: number[]
}

const pad16 = (n: number) => Math.ceil(n / 16) * 16

// The tensors of one FFN: w_in (+ b_in), w_out (+ b_out).
function ffnTensors(m: ModelConfig, width: number): number[] {
  const C = m.d_model
  return m.arch === 'gpt-moe' ? [width * C, width, C * width, C] : [2 * width * C, C * width]
}

class Tally {
  raw = 0
  padded = 0
  add(...numels: number[]): this {
    for (const n of numels) {
      this.raw += n
      this.padded += pad16(n)
    }
    return this
  }
}

export function countParams(m: ModelConfig): ParamCounts {
  const C = m.d_model, V = m.vocab_size
  const kv = m.n_kv_heads ?? m.n_heads
  const qkvRows = (m.n_heads + 2 * kv) * (C / m.n_heads)
  const bias = m.arch === 'gpt-moe'
  const qkvBias = m.qkv_bias ?? bias
  const norm = bias ? [C, C] : [C]
  const tie = m.tie_embeddings ?? m.arch === 'gpt-moe'
  const expertWidth = m.expert_d_ff ?? m.d_ff
  const layerExperts = Array.isArray(m.n_experts) ? m.n_experts : null

  const dense = new Tally().add(V * C, ...(m.arch === 'gpt-moe' ? [m.max_seq_len * C] : []), ...norm, ...(tie ? [] : [V * C]))
  const one = new Tally().add(...ffnTensors(m, expertWidth))
  const expertsPerLayer: number[] = []
  for (let l = 0; l < m.n_layers; l++) {
    dense.add(...norm, qkvRows * C, ...(qkvBias ? [qkvRows] : []), C * C, ...(bias ? [C] : []), ...norm)
    if ((l + 1) % m.moe_every !== 0) {
      dense.add(...ffnTensors(m, m.d_ff))
      continue
    }
    const E = layerExperts ? layerExperts[expertsPerLayer.length]! : (m.n_experts as number)
    expertsPerLayer.push(E)
    dense.add(E * C)
    if (m.shared_expert_d_ff > 0) dense.add(...ffnTensors(m, m.shared_expert_d_ff), ...(m.shared_expert_gate ? [C] : []))
    if (m.residual_mlp) dense.add(...ffnTensors(m, m.d_ff))
  }
  const routed = expertsPerLayer.reduce((a, b) => a + b, 0)
  return {
    dense: dense.raw,
    perExpert: expertsPerLayer.map(() => one.raw),
    experts: routed * one.raw,
    total: dense.raw + routed * one.raw,
    padded: {
      dense: dense.padded,
      perExpert: expertsPerLayer.map(() => one.padded),
      experts: routed * one.padded,
      total: dense.padded + routed * one.padded,
    },
    expertsPerLayer,
  }
}
