// Model families as features, the workbench's mirror of the engine's (native/engine/model/features.cpp):
// a family is a name for a row of default features, and the planner's parameter counts and activation
// sizes read the features, never the family name. The Hugging Face model types the engine imports and
// exports (native/engine/train/hf_families.cpp) are listed here once for the contract, the host and the
// UI. A parity test (test/unit/model-families-parity.test.ts) compares both sides through the engine.
import type { ModelConfig } from './config'

export type NormKind = 'layernorm' | 'rmsnorm'
export type PositionKind = 'learned' | 'rope'
export type AttentionKind = 'mha' | 'gqa' | 'mla'
export type FfnActivation = 'gelu' | 'swiglu' | 'swiglu_clamped'
/** RMSNorm on q and k before rope: over the whole projection (OLMoE) or on each head (Qwen3). */
export type QkNorm = 'none' | 'projection' | 'head'
export type RouterScoring = 'softmax' | 'sigmoid'
export type TopkSelection = 'plain' | 'group_limited' | 'noaux_tc'

/** What a family fixes, and the defaults of the config fields it only suggests (qkv_bias, tie_embeddings). */
export interface FamilyFeatures {
  norm: NormKind
  position: PositionKind
  attention: AttentionKind
  /** Default of model.qk_norm. */
  qk_norm: QkNorm
  activation: FfnActivation
  router_scoring: RouterScoring
  topk_selection: TopkSelection
  /** Biases on the norms, the attention output and the FFN projections. */
  linear_bias: boolean
  qkv_bias: boolean
  tie_embeddings: boolean
  /** Bias on the attention out-projection (every linear_bias family has it too). */
  out_bias: boolean
  /** Biases on the FFN projections (every linear_bias family has them too). */
  ffn_bias: boolean
  /** A bias on the router's logits. */
  router_bias: boolean
  /** A learned logit per head in the attention softmax's denominator (gpt-oss). */
  attention_sinks: boolean
}

export interface ModelFamily {
  name: string
  summary: string
  features: FamilyFeatures
}

export const MODEL_FAMILIES = [
  {
    name: 'gpt-moe',
    summary: 'LayerNorm, learned positions, multi-head attention, GELU experts, biases',
    features: {
      norm: 'layernorm', position: 'learned', attention: 'mha', qk_norm: 'none', activation: 'gelu',
      router_scoring: 'softmax', topk_selection: 'plain', linear_bias: true, qkv_bias: true, tie_embeddings: true,
      out_bias: true, ffn_bias: true, router_bias: false, attention_sinks: false,
    },
  },
  {
    name: 'mixtral',
    summary: 'RMSNorm, RoPE, grouped-query attention, SwiGLU experts, no biases',
    features: {
      norm: 'rmsnorm', position: 'rope', attention: 'gqa', qk_norm: 'none', activation: 'swiglu',
      router_scoring: 'softmax', topk_selection: 'plain', linear_bias: false, qkv_bias: false, tie_embeddings: false,
      out_bias: false, ffn_bias: false, router_bias: false, attention_sinks: false,
    },
  },
  {
    name: 'gpt-oss',
    summary: 'RMSNorm, RoPE, grouped-query attention with sinks and sliding windows, clamped SwiGLU experts, '
      + 'biases on q/k/v/o, the experts and the router',
    features: {
      norm: 'rmsnorm', position: 'rope', attention: 'gqa', qk_norm: 'none', activation: 'swiglu_clamped',
      router_scoring: 'softmax', topk_selection: 'plain', linear_bias: false, qkv_bias: true, tie_embeddings: false,
      out_bias: true, ffn_bias: true, router_bias: true, attention_sinks: true,
    },
  },
] as const satisfies readonly ModelFamily[]

export type FamilyName = (typeof MODEL_FAMILIES)[number]['name']
export const FAMILY_NAMES = MODEL_FAMILIES.map((f) => f.name) as [FamilyName, ...FamilyName[]]

export function modelFamily(name: string): ModelFamily {
  const family = MODEL_FAMILIES.find((f) => f.name === name)
  if (!family) throw new Error(`model.arch: "${name}" is not one of ${FAMILY_NAMES.join(', ')}`)
  return family
}

/** The features one model runs with: its family's, with the config's choices among them applied. */
export interface ModelFeatures extends FamilyFeatures {
  /** With rope positions; 0 otherwise. */
  rope_theta: number
  shared_expert: boolean
  shared_expert_gate: boolean
  residual_mlp: boolean
  moe_every: number
  /** q, k and v clamped to [-clip_qkv, clip_qkv] after the q/k norm; null: off. */
  clip_qkv: number | null
}

export function modelFeatures(m: ModelConfig): ModelFeatures {
  const f = modelFamily(m.arch).features
  return {
    ...f,
    qkv_bias: m.qkv_bias ?? f.qkv_bias,
    out_bias: f.out_bias || m.out_bias === true,
    tie_embeddings: m.tie_embeddings ?? f.tie_embeddings,
    qk_norm: m.qk_norm ?? f.qk_norm,
    rope_theta: f.position === 'rope' ? m.rope_theta : 0,
    shared_expert: m.shared_expert_d_ff > 0,
    shared_expert_gate: m.shared_expert_gate,
    residual_mlp: m.residual_mlp,
    moe_every: m.moe_every,
    clip_qkv: m.clip_qkv ?? null,
    // Latent attention and the router's scoring and selection are the config's choices within any RoPE family.
    attention: m.latent_attention ? 'mla' : f.attention,
    router_scoring: m.router?.scoring ?? f.router_scoring,
    topk_selection: m.router?.selection ?? f.topk_selection,
  }
}

/** The shape fields that decide which layers are MoE layers. */
export interface LayerShape {
  n_layers: number
  moe_every?: number
  dense_layers?: readonly number[] | null
}

/**
 * The one rule for which layers are MoE layers, as the engine has it (ModelConfig::is_moe_layer): every
 * moe_every-th layer, except the dense_layers.
 */
export function isMoeLayer(m: LayerShape, l: number): boolean {
  const every = m.moe_every ?? 1
  return every > 0 && (l + 1) % every === 0 && !(m.dense_layers ?? []).includes(l)
}

/** Indexes of the MoE layers, in order. */
export function moeLayerIndexes(m: LayerShape): number[] {
  const out: number[] = []
  for (let l = 0; l < m.n_layers; l++) if (isMoeLayer(m, l)) out.push(l)
  return out
}

/** The attention output's width, the out-projection's input (latent attention: n_heads · v_head_dim). */
export const attnWidth = (m: Pick<ModelConfig, 'd_model' | 'n_heads' | 'head_dim' | 'latent_attention'>): number =>
  m.n_heads * (m.latent_attention ? m.latent_attention.v_head_dim : headSize(m))

/** The attention's head size: head_dim when set, else d_model / n_heads. */
export const headSize = (m: { d_model: number; n_heads: number; head_dim?: number | null }): number =>
  m.head_dim ?? m.d_model / m.n_heads

/** A gated activation (SwiGLU, clamped or not) computes gate and up in one in-projection of 2F rows. */
export const gatedFfn = (f: FamilyFeatures): boolean => f.activation === 'swiglu' || f.activation === 'swiglu_clamped'

/** The model section as the engine runs it: every optional field filled in as the engine fills it. */
export function effectiveModelConfig(m: ModelConfig): Omit<ModelConfig, 'n_experts'> & {
  n_kv_heads: number
  expert_d_ff: number
  n_experts: number[]
  qkv_bias: boolean
  tie_embeddings: boolean
} {
  const f = modelFeatures(m)
  const moeLayers = moeLayerIndexes(m).length
  // The engine writes these only when they do something (differ from their defaults).
  const { qk_norm, clip_qkv, sliding_window, sliding_layers, swiglu_alpha, swiglu_limit, out_bias, ...rest } = m
  return {
    ...rest,
    ...(qk_norm !== undefined && qk_norm !== 'none' ? { qk_norm } : {}),
    ...(clip_qkv != null ? { clip_qkv } : {}),
    ...(out_bias === true ? { out_bias } : {}),
    ...(sliding_window ? { sliding_window, sliding_layers } : {}),
    ...(swiglu_alpha !== undefined && swiglu_alpha !== 1.702 ? { swiglu_alpha } : {}),
    ...(swiglu_limit !== undefined && swiglu_limit !== 7 ? { swiglu_limit } : {}),
    n_kv_heads: m.n_kv_heads ?? m.n_heads,
    expert_d_ff: m.expert_d_ff ?? m.d_ff,
    n_experts: Array.isArray(m.n_experts) ? m.n_experts : new Array<number>(moeLayers).fill(m.n_experts),
    qkv_bias: f.qkv_bias,
    tie_embeddings: f.tie_embeddings,
    // The engine writes the router section only when it differs from softmax with plain top-k.
    router: m.router && (m.router.scoring !== 'softmax' || m.router.selection !== 'plain') ? m.router : undefined,
  }
}

/** The Hugging Face model types the engine imports and exports, each with the family whose math it has. */
export const HF_MODEL_TYPES = [
  { model_type: 'mixtral', label: 'Mixtral', family: 'mixtral' },
  { model_type: 'qwen2_moe', label: 'Qwen2-MoE', family: 'mixtral' },
  { model_type: 'olmoe', label: 'OLMoE', family: 'mixtral' },
  { model_type: 'qwen3_moe', label: 'Qwen3-MoE', family: 'mixtral' },
  { model_type: 'deepseek_v2', label: 'DeepSeek-V2', family: 'mixtral' },
  { model_type: 'deepseek_v3', label: 'DeepSeek-V3', family: 'mixtral' },
  { model_type: 'gpt_oss', label: 'gpt-oss', family: 'gpt-oss' },
] as const satisfies readonly { model_type: string; label: string; family: FamilyName }[]

export type HfModelType = (typeof HF_MODEL_TYPES)[number]['model_type']
export const HF_MODEL_TYPE_NAMES = HF_MODEL_TYPES.map((t) => t.model_type) as [HfModelType, ...HfModelType[]]

/**
 * How an export stores the routed experts: one set of tensors per expert, or fused 3-D tensors
 * (experts.gate_up_proj / experts.down_proj, as newer transformers writes). Absent: the model type's usual
 * layout (fused for gpt_oss, which has no other).
 */
export const HF_EXPERT_LAYOUTS = ['per-expert', 'fused'] as const
export type HfExpertLayout = (typeof HF_EXPERT_LAYOUTS)[number]
