// How the engine computes an imported model, for the Models card: its family and the features the config chose
// within it (modelFeatures, the mirror of the engine's), so that a Qwen3-MoE shown as the "mixtral" family also
// says it runs q/k norms per head, a DeepSeek its latent attention and grouped routing, and so on.
import type { ModelConfig } from '../../main/api/config'
import {
  modelFeatures, type FfnActivation, type ModelFeatures, type NormKind, type QkNorm, type TopkSelection,
} from '../../main/api/model-families'

// Words for every value of each feature: a new value fails the type check here until it has its words.
const NORM: Record<NormKind, string> = { layernorm: 'LayerNorm', rmsnorm: 'RMSNorm' }
const ACTIVATION: Record<FfnActivation, string> = {
  gelu: 'GELU experts', swiglu: 'SwiGLU experts', swiglu_clamped: 'clamped SwiGLU experts',
}
const QK_NORM: Record<QkNorm, string | null> = {
  none: null, projection: 'q/k norm over the projection', head: 'q/k norm per head',
}
const SELECTION: Record<TopkSelection, string> = {
  plain: 'top', group_limited: 'group-limited top', noaux_tc: 'bias-corrected group top',
}

const number = (x: number): string => x.toLocaleString('en-US', { maximumSignificantDigits: 6 })

function attention(m: ModelConfig, f: ModelFeatures): string {
  if (f.attention === 'mla') return 'multi-head latent attention'
  const kv = m.n_kv_heads ?? m.n_heads
  return f.attention === 'mha' ? `multi-head attention (${m.n_heads} heads)`
    : `grouped-query attention (${m.n_heads} q / ${kv} kv heads)`
}

function biases(f: ModelFeatures): string | null {
  if (f.linear_bias) return 'biases'
  const parts = [f.qkv_bias && 'q/k/v', f.out_bias && 'out', f.ffn_bias && 'expert', f.router_bias && 'router']
    .filter((p): p is string => !!p)
  return parts.length ? `${parts.join(', ')} biases` : null
}

/** One line: the family, then its features as this config sets them, most telling first. */
export function computedAs(m: ModelConfig): string {
  const f = modelFeatures(m)
  const windowed = m.sliding_window ? m.sliding_layers?.length ?? 0 : 0
  const parts = [
    NORM[f.norm],
    f.position === 'rope'
      ? `RoPE θ ${number(f.rope_theta)}${m.rope_scaling ? ` with YaRN ×${number(m.rope_scaling.factor)}` : ''}`
      : 'learned positions',
    attention(m, f),
    QK_NORM[f.qk_norm],
    f.clip_qkv !== null ? `q/k/v clipped at ±${number(f.clip_qkv)}` : null,
    windowed ? `a ${number(m.sliding_window!)}-token window on ${windowed} of ${m.n_layers} layers` : null,
    f.attention_sinks ? 'attention sinks' : null,
    ACTIVATION[f.activation],
    f.shared_expert ? (f.shared_expert_gate ? 'a gated shared expert' : 'a shared expert') : null,
    `${f.router_scoring} router, ${SELECTION[f.topk_selection]}-${m.top_k}${m.renormalize ? ' renormalised' : ''}`,
    biases(f),
  ].filter((p): p is string => !!p)
  return `${m.arch} family: ${parts.join(' · ')}`
}
