// Saved activations and backward scratch of one micro-batch, in floats, as the engine allocates them
// (per layer: attention, norms, routing, the expert segments; then the head and losses). This is the
// whole-model form of MPipeMoE eq. 2 (activations) and eq. 3 (temporary buffers).
import type { RunConfig } from '../../api/config'
import { attnWidth, gatedFfn, headSize, isMoeLayer, modelFeatures } from '../../api/model-families'

export function activationFloats(c: RunConfig): { saved: number; scratch: number } {
  const m = c.model
  const N = c.train.batch_size * c.train.seq_len, C = m.d_model, V = m.vocab_size
  const kv = m.n_kv_heads ?? m.n_heads
  const Q = (m.n_heads + 2 * kv) * headSize(m)
  const A = attnWidth(m) // the attention output, the out-projection's input
  // Latent attention's saved buffers and backward scratch per layer (native/engine/model/mla_block.cpp).
  const la = m.latent_attention
  let mlaSaved = 0, mlaScratch = 0
  if (la) {
    const NH = m.n_heads, dr = la.qk_rope_head_dim, D = la.qk_nope_head_dim + dr, HS = Math.max(D, la.v_head_dim)
    const KV = NH * (la.qk_nope_head_dim + la.v_head_dim), PE = (NH + 1) * dr
    mlaSaved = N * (2 * la.q_lora_rank + (la.q_lora_rank ? 1 : 0) + NH * D + 2 * la.kv_lora_rank + dr + 1 + KV +
      2 * PE + 4 * NH * HS + NH + NH * la.v_head_dim)
    mlaScratch = N * (4 * NH * HS + 2 * PE + NH * D + KV + 2 * la.kv_lora_rank + dr + 2 * la.q_lora_rank)
  }
  const f = modelFeatures(m)
  const gated = gatedFfn(f)
  const inRows = (F: number) => (gated ? 2 * F : F)
  const ffn = (rows: number, F: number) => rows * (inRows(F) + F)
  const experts = Array.isArray(m.n_experts) ? m.n_experts : null
  const expertWidth = m.expert_d_ff ?? m.d_ff
  let saved = N * C // embedding output
  let scratchRows = N
  let moeIndex = 0
  for (let l = 0; l < m.n_layers; l++) {
    // each attention stage (q/k norm with its rstd, clip_qkv, rope) keeps its q/k/v beside the projection's output
    const stages = (f.qk_norm !== 'none' ? 1 : 0) + (f.clip_qkv !== null ? 1 : 0) + (f.position === 'rope' ? 1 : 0)
    const qkRstd = f.qk_norm === 'none' ? 0 : f.qk_norm === 'head' ? N * (m.n_heads + kv) : 2 * N
    saved += 5 * N * C + 4 * N + (la ? mlaSaved : N * A + N * Q * (1 + stages) + qkRstd + N * m.n_heads)
    if (!isMoeLayer(m, l)) {
      saved += ffn(N, m.d_ff)
      continue
    }
    const E = experts ? experts[moeIndex]! : (m.n_experts as number)
    moeIndex++
    const K = m.top_k
    const S = m.capacity_factor === null ? N * K : E * Math.ceil((m.capacity_factor * N * K) / E)
    scratchRows = Math.max(scratchRows, S)
    saved += 2 * N * E + 2 * N * K + 2 * S * C + ffn(S, expertWidth)
    if (f.shared_expert) saved += ffn(N, m.shared_expert_d_ff) + N * C + (f.shared_expert_gate ? N * C + N : 0)
    if (f.residual_mlp) saved += ffn(N, m.d_ff) + N * C
  }
  saved += N * C + 3 * N + N * V // final norm, losses, logits
  const widest = Math.max(inRows(expertWidth), inRows(m.d_ff), inRows(m.shared_expert_d_ff))
  const scratch = N * V + 2 * N * C + N * Math.max(C, A) + (la ? mlaScratch : 2 * N * Q) + 2 * scratchRows * C + scratchRows * (widest + widest / (gated ? 2 : 1))
  return { saved, scratch }
}
