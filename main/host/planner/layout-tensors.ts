// The engine's parameter layout by name (native/engine/model/params.cpp: ParamLayout), tensor for tensor, and
// each tensor's finetune group: the TypeScript mirror of the engine's grouping of its layout for the config's
// `finetune` section (which groups train, which linears LoRA adapts). param-count.ts counts the same tensors
// by the describe groups; the sum of these tensors equals its total.
import type { ModelConfig } from '../../api/config'
import type { FinetuneGroup, LoraTarget } from '../../api/finetune'
import { attnWidth, gatedFfn, headSize, isMoeLayer, modelFeatures, type ModelFeatures } from '../../api/model-families'

export interface LayoutTensor {
  name: string
  numel: number
  /** Model layer index (null: wte, wpe, the final norm, lm_head). */
  layer: number | null
  /** The routed expert this tensor belongs to (null: not a routed expert's). */
  expert: number | null
  /** The finetune group whose switch trains it; null: never trains (the router's selection bias). */
  group: FinetuneGroup | null
  /** A linear LoRA can adapt: its LoRA target and [out, in]; null for biases, norms, embeddings. */
  linear: { target: LoraTarget; out: number; in: number } | null
}

/**
 * The finetune group of a layout tensor, by name (the mirror of the engine's rule): wte/wpe → embeddings;
 * every layers.L.attn.* (projections of both attention kinds, their q/k and latent norms, biases, sinks) →
 * attention; norm1/norm2/norm_f → norms; moe.router.weight/bias → router; moe.router.selection_bias → null (never a
 * gradient); moe.experts.* → experts; moe.shared.* and moe.shared_gate → shared_experts; a dense layer's mlp.* and
 * the PR-MoE moe.residual.* → dense_mlp; lm_head → lm_head.
 */
export function finetuneGroupOf(name: string): FinetuneGroup | null {
  if (name === 'wte' || name === 'wpe') return 'embeddings'
  if (name === 'lm_head.weight') return 'lm_head'
  if (name.startsWith('norm_f.')) return 'norms'
  const rest = name.replace(/^layers\.\d+\./, '')
  if (rest === name) throw new Error(`no finetune group for tensor "${name}"`)
  if (rest.startsWith('attn.')) return 'attention'
  if (rest.startsWith('norm1.') || rest.startsWith('norm2.')) return 'norms'
  if (rest === 'moe.router.selection_bias') return null
  if (rest.startsWith('moe.router.')) return 'router'
  if (rest.startsWith('moe.experts.')) return 'experts'
  if (rest.startsWith('moe.shared.') || rest.startsWith('moe.shared_gate.')) return 'shared_experts'
  if (rest.startsWith('mlp.') || rest.startsWith('moe.residual.')) return 'dense_mlp'
  throw new Error(`no finetune group for tensor "${name}"`)
}

export function layoutTensors(m: ModelConfig): LayoutTensor[] {
  const f = modelFeatures(m)
  const C = m.d_model, V = m.vocab_size, HS = headSize(m), NH = m.n_heads, KV = m.n_kv_heads ?? m.n_heads
  const out: LayoutTensor[] = []
  const add = (name: string, numel: number, layer: number | null, expert: number | null = null,
    linear: LayoutTensor['linear'] = null) => out.push({ name, numel, layer, expert, group: finetuneGroupOf(name), linear })
  const lin = (target: LoraTarget, o: number, i: number) => ({ target, out: o, in: i })
  const ffn = (prefix: string, F: number, l: number, target: LoraTarget, expert: number | null = null) => {
    const bias = f.ffn_bias
    if (gatedFfn(f)) {
      add(prefix + 'gate_up.weight', 2 * F * C, l, expert, lin(target, 2 * F, C))
      if (bias) add(prefix + 'gate_up.bias', 2 * F, l, expert)
      add(prefix + 'down.weight', C * F, l, expert, lin(target, C, F))
      if (bias) add(prefix + 'down.bias', C, l, expert)
    } else {
      add(prefix + 'fc.weight', F * C, l, expert, lin(target, F, C))
      if (bias) add(prefix + 'fc.bias', F, l, expert)
      add(prefix + 'proj.weight', C * F, l, expert, lin(target, C, F))
      if (bias) add(prefix + 'proj.bias', C, l, expert)
    }
  }
  add('wte', V * C, null)
  if (f.position === 'learned') add('wpe', m.max_seq_len * C, null)
  const experts = Array.isArray(m.n_experts) ? m.n_experts : null
  let moeIndex = 0
  for (let l = 0; l < m.n_layers; l++) {
    const p = `layers.${l}.`
    add(p + 'norm1.weight', C, l)
    if (f.linear_bias) add(p + 'norm1.bias', C, l)
    attention(m, f, p, l, add, lin)
    add(p + 'norm2.weight', C, l)
    if (f.linear_bias) add(p + 'norm2.bias', C, l)
    if (!isMoeLayer(m, l)) {
      ffn(p + 'mlp.', m.d_ff, l, 'dense_mlp')
      continue
    }
    const E = experts ? experts[moeIndex]! : (m.n_experts as number)
    moeIndex++
    add(p + 'moe.router.weight', E * C, l)
    if (f.router_bias) add(p + 'moe.router.bias', E, l)
    if (m.selection_bias) add(p + 'moe.router.selection_bias', E, l)
    for (let e = 0; e < E; e++) ffn(`${p}moe.experts.${e}.`, m.expert_d_ff ?? m.d_ff, l, 'experts', e)
    if (f.shared_expert) ffn(p + 'moe.shared.', m.shared_expert_d_ff, l, 'shared_experts')
    if (f.shared_expert_gate) add(p + 'moe.shared_gate.weight', C, l)
    if (f.residual_mlp) ffn(p + 'moe.residual.', m.d_ff, l, 'dense_mlp')
  }
  add('norm_f.weight', C, null)
  if (f.linear_bias) add('norm_f.bias', C, null)
  if (!f.tie_embeddings) add('lm_head.weight', V * C, null)
  return out

  // The attention block's tensors (params.cpp; add_latent_attention for latent attention). LoRA adapts q, k and v
  // as three linears (as PEFT names q_proj, k_proj, v_proj) though the engine stores them fused.
  function attention(m: ModelConfig, f: ModelFeatures, p: string, l: number, addT: typeof add, linT: typeof lin) {
    if (m.latent_attention) {
      const a = m.latent_attention, qRows = NH * (a.qk_nope_head_dim + a.qk_rope_head_dim)
      if (a.q_lora_rank === 0) {
        addT(p + 'attn.q.weight', qRows * C, l, null, linT('attention', qRows, C))
      } else {
        addT(p + 'attn.q_a.weight', a.q_lora_rank * C, l, null, linT('attention', a.q_lora_rank, C))
        addT(p + 'attn.q_a_norm.weight', a.q_lora_rank, l)
        addT(p + 'attn.q_b.weight', qRows * a.q_lora_rank, l, null, linT('attention', qRows, a.q_lora_rank))
      }
      addT(p + 'attn.kv_a.weight', (a.kv_lora_rank + a.qk_rope_head_dim) * C, l, null, linT('attention', a.kv_lora_rank + a.qk_rope_head_dim, C))
      addT(p + 'attn.kv_a_norm.weight', a.kv_lora_rank, l)
      const kvRows = NH * (a.qk_nope_head_dim + a.v_head_dim)
      addT(p + 'attn.kv_b.weight', kvRows * a.kv_lora_rank, l, null, linT('attention', kvRows, a.kv_lora_rank))
    } else {
      const qkv = (NH + 2 * KV) * HS
      addT(p + 'attn.qkv.weight', qkv * C, l, null, linT('attention', qkv, C))
      if (f.qkv_bias) addT(p + 'attn.qkv.bias', qkv, l)
      if (f.qk_norm !== 'none') {
        addT(p + 'attn.q_norm.weight', f.qk_norm === 'head' ? HS : NH * HS, l)
        addT(p + 'attn.k_norm.weight', f.qk_norm === 'head' ? HS : KV * HS, l)
      }
    }
    addT(p + 'attn.out.weight', C * attnWidth(m), l, null, linT('attention', C, attnWidth(m)))
    if (f.out_bias) addT(p + 'attn.out.bias', C, l)
    if (f.attention_sinks) addT(p + 'attn.sinks', NH, l)
  }
}

/**
 * The LoRA adapters of one linear as LoRA sees it, [out, in] each: the fused qkv as q, k and v; a gated FFN's
 * gate_up as gate and up (PEFT's gate_proj, up_proj); every other linear as itself.
 */
export function adaptedLinears(t: LayoutTensor, m: ModelConfig): { out: number; in: number }[] {
  if (t.name.endsWith('attn.qkv.weight')) {
    const HS = headSize(m), KV = m.n_kv_heads ?? m.n_heads
    return [{ out: m.n_heads * HS, in: m.d_model }, { out: KV * HS, in: m.d_model }, { out: KV * HS, in: m.d_model }]
  }
  if (!t.linear) return []
  if (t.name.endsWith('gate_up.weight')) return [{ out: t.linear.out / 2, in: t.linear.in }, { out: t.linear.out / 2, in: t.linear.in }]
  return [{ out: t.linear.out, in: t.linear.in }]
}
