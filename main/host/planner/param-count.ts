// Parameter counts of a run config, tensor for tensor as the engine lays them out (docs/model.md,
// native/engine/model/params.cpp): the dense part, which always lives on the device, and each routed
// expert, which offload may move. The arena pads every tensor to a multiple of 16 floats (64-byte
// alignment), so byte bookings use the padded sizes while the counts are the tensors' own.
import type { ModelConfig } from '../../api/config'
import { attnWidth as attnWidthOf, gatedFfn, headSize, isMoeLayer, modelFeatures, type ModelFeatures } from '../../api/model-families'

/** Where a tensor counts, as the engine groups them (native/engine/model/describe.cpp). */
export type ParamGroup =
  | 'embeddings' | 'norms' | 'attention' | 'dense_ffn' | 'router' | 'experts' | 'shared_expert' | 'residual_mlp' | 'head'

export interface ParamCounts {
  dense: number
  perExpert: number[]  // [MoE layer] parameters of one expert of that layer
  experts: number      // all experts of all layers
  total: number
  /** Padded floats, as the engine's arena holds them. */
  padded: { dense: number; perExpert: number[]; experts: number; total: number }
  /** [MoE layer] routed experts of that layer. */
  expertsPerLayer: number[]
  /** Parameters per group (groups without tensors left out). */
  groups: Partial<Record<ParamGroup, number>>
}

const pad16 = (n: number) => Math.ceil(n / 16) * 16

// The tensors of one FFN: w_in (+ b_in), w_out (+ b_out); a gated activation has 2F rows in.
function ffnTensors(f: ModelFeatures, C: number, width: number): number[] {
  const inRows = gatedFfn(f) ? 2 * width : width
  return f.ffn_bias ? [inRows * C, inRows, C * width, C] : [inRows * C, C * width]
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
  const f = modelFeatures(m)
  const C = m.d_model, V = m.vocab_size
  const kv = m.n_kv_heads ?? m.n_heads
  const qkvRows = (m.n_heads + 2 * kv) * headSize(m)
  const attnWidth = attnWidthOf(m)
  // q/k norm weights (counted with the norms, as the engine does): over the whole q and k projections, or one head's width each
  const qkNorm = f.qk_norm === 'none' ? [] : f.qk_norm === 'head' ? [headSize(m), headSize(m)] : [m.n_heads * headSize(m), kv * headSize(m)]
  const norm = f.linear_bias ? [C, C] : [C]
  const expertWidth = m.expert_d_ff ?? m.d_ff
  const layerExperts = Array.isArray(m.n_experts) ? m.n_experts : null

  const groups = new Map<ParamGroup, Tally>()
  const add = (group: ParamGroup, ...numels: number[]) => {
    if (!groups.has(group)) groups.set(group, new Tally())
    groups.get(group)!.add(...numels)
  }
  add('embeddings', V * C, ...(f.position === 'learned' ? [m.max_seq_len * C] : []))
  add('norms', ...norm)
  if (!f.tie_embeddings) add('head', V * C)
  const one = new Tally().add(...ffnTensors(f, C, expertWidth))
  const expertsPerLayer: number[] = []
  for (let l = 0; l < m.n_layers; l++) {
    add('norms', ...norm, ...norm)
    if (m.latent_attention) {
      // Latent attention (native/engine/model/params.cpp, add_latent_attention); its two norms count as norms.
      const a = m.latent_attention, qRows = m.n_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)
      if (a.q_lora_rank === 0) {
        add('attention', qRows * C)
      } else {
        add('attention', a.q_lora_rank * C, qRows * a.q_lora_rank)
        add('norms', a.q_lora_rank)
      }
      add('attention', (a.kv_lora_rank + a.qk_rope_head_dim) * C)
      add('norms', a.kv_lora_rank)
      add('attention', m.n_heads * (a.qk_nope_head_dim + a.v_head_dim) * a.kv_lora_rank, C * attnWidth)
    } else {
      add('attention', qkvRows * C, ...(f.qkv_bias ? [qkvRows] : []), C * attnWidth, ...(f.out_bias ? [C] : []),
        ...(f.attention_sinks ? [m.n_heads] : []))
    }
    if (qkNorm.length) add('norms', ...qkNorm)
    if (!isMoeLayer(m, l)) {
      add('dense_ffn', ...ffnTensors(f, C, m.d_ff))
      continue
    }
    const E = layerExperts ? layerExperts[expertsPerLayer.length]! : (m.n_experts as number)
    expertsPerLayer.push(E)
    add('router', E * C, ...(f.router_bias ? [E] : []), ...(m.selection_bias ? [E] : []))
    if (f.shared_expert) add('shared_expert', ...ffnTensors(f, C, m.shared_expert_d_ff))
    if (f.shared_expert_gate) add('shared_expert', C)
    if (f.residual_mlp) add('residual_mlp', ...ffnTensors(f, C, m.d_ff))
  }
  const routed = expertsPerLayer.reduce((a, b) => a + b, 0)
  let denseRaw = 0, densePadded = 0
  for (const t of groups.values()) {
    denseRaw += t.raw
    densePadded += t.padded
  }
  const byGroup: Partial<Record<ParamGroup, number>> = Object.fromEntries([...groups].map(([group, t]) => [group, t.raw]))
  if (routed > 0) byGroup.experts = routed * one.raw
  return {
    dense: denseRaw,
    perExpert: expertsPerLayer.map(() => one.raw),
    experts: routed * one.raw,
    total: denseRaw + routed * one.raw,
    padded: {
      dense: densePadded,
      perExpert: expertsPerLayer.map(() => one.padded),
      experts: routed * one.padded,
      total: densePadded + routed * one.padded,
    },
    expertsPerLayer,
    groups: byGroup,
  }
}
