// The run config schema (docs/model.md), defined once: the New-run form is generated from it, the
// host validates with it, and the engine receives exactly what passed. Field names match the engine's.
import { z } from 'zod'

import { FinetuneConfigSchema, type FinetuneConfig } from './finetune'
import { FAMILY_NAMES, MODEL_FAMILIES, headSize, modelFamily, moeLayerIndexes } from './model-families'

const int = (min: number, max: number) => z.number().int().min(min).max(max)

// Optional model sections (native/engine/model/config_sections.h): multi-head latent attention, YaRN rope
// scaling, and the router's scoring and top-k selection. The engine writes each back with every field filled.
export const LatentAttentionSchema = z
  .object({
    q_lora_rank: int(0, 1 << 16).default(0).describe('Rank of the low-rank q projection; 0: a full q projection'),
    kv_lora_rank: int(1, 1 << 16).describe('Rank of the compressed key/value latent'),
    qk_nope_head_dim: int(0, 1 << 12).default(0).describe('Per-head q/k width without rope'),
    qk_rope_head_dim: int(2, 1 << 12).describe('Per-head q/k rope width (even); the rope key is shared by all heads'),
    v_head_dim: int(1, 1 << 12).describe('Per-head value width'),
    rope_interleave: z.boolean().default(true).describe('Rope pairs (2i, 2i+1) as DeepSeek stores them; false: (i, i + d/2)'),
    softmax_mscale: z.boolean().default(false).describe("Multiply the softmax scale by YaRN's mscale(factor, mscale_all_dim)² (DeepSeek-V3)"),
  })
  .strict()

export const RopeScalingSchema = z
  .object({
    type: z.literal('yarn'),
    factor: z.number().min(1).max(1e6).describe('Context extension factor'),
    original_max_position_embeddings: int(0, 1 << 30).default(0).describe('Pretraining context; 0: max_seq_len'),
    beta_fast: z.number().positive().default(32),
    beta_slow: z.number().positive().default(1),
    mscale: z.number().min(0).default(0),
    mscale_all_dim: z.number().min(0).default(0),
    attention_factor: z.number().min(0).default(0).describe('cos/sin factor; 0: derived from factor and the mscales'),
    truncate: z.boolean().default(true),
  })
  .strict()

export const RouterConfigSchema = z
  .object({
    scoring: z.enum(['softmax', 'sigmoid']).default('softmax').describe('Softmax over the experts, or a sigmoid per expert'),
    selection: z.enum(['plain', 'group_limited', 'noaux_tc']).default('plain')
      .describe('Top-k over all experts, or within the topk_group best of n_group groups (best expert / best two)'),
    n_group: int(1, 64).default(1),
    topk_group: int(1, 64).default(1),
  })
  .strict()

export const ModelConfigSchema = z
  .object({
    arch: z.enum(FAMILY_NAMES).describe(MODEL_FAMILIES.map((f) => `${f.name}: ${f.summary}`).join('; ')),
    vocab_size: int(2, 1 << 24).default(256).describe('Vocabulary size (256 for the byte tokenizer)'),
    d_model: int(2, 1 << 16).default(256).describe('Model width'),
    n_layers: int(1, 1024).default(4).describe('Transformer layers'),
    n_heads: int(1, 1024).default(4).describe('Attention heads'),
    n_kv_heads: int(1, 1024).optional().describe('Key/value heads (GQA, mixtral); defaults to n_heads'),
    max_seq_len: int(1, 1 << 20).default(256).describe('Longest sequence'),
    d_ff: int(1, 1 << 20).default(1024).describe('Dense FFN width (dense layers, PR-MoE residual)'),
    expert_d_ff: int(1, 1 << 20).optional().describe("Each expert's FFN width; defaults to d_ff"),
    n_experts: z.union([int(1, 1 << 16), z.array(int(1, 1 << 16)).min(1)]).default(8)
      .describe('Experts per MoE layer, or one number per MoE layer (PR-MoE pyramid)'),
    top_k: int(1, 64).default(2).describe('Experts per token'),
    moe_every: int(1, 1024).default(1).describe('Layer l is MoE iff (l + 1) % moe_every == 0; others are dense'),
    dense_layers: z.array(int(0, 1023)).optional()
      .describe('Layers that are dense although moe_every makes them MoE (increasing indexes)'),
    head_dim: int(1, 1 << 14).nullable().optional().describe('Attention head size; null: d_model / n_heads'),
    sliding_window: int(0, 1 << 20).optional()
      .describe('Keys a query sees on the sliding_layers (itself included; gpt-oss); 0 or absent: none'),
    sliding_layers: z.array(int(0, 1023)).optional()
      .describe('Layers with sliding-window attention (increasing indexes); needs sliding_window'),
    swiglu_alpha: z.number().min(1e-6).max(1e6).optional().describe("Clamped SwiGLU's sigmoid gain (gpt-oss); default 1.702"),
    swiglu_limit: z.number().min(1e-6).max(1e6).optional().describe("Clamped SwiGLU's clamp (gpt-oss); default 7"),
    renormalize: z.boolean().default(true).describe('Renormalise the top-k weights to sum to 1'),
    routed_scaling_factor: z.number().min(1e-6).max(1e6).optional()
      .describe('The top-k weights are multiplied by this after renormalising (DeepSeek); default 1'),
    selection_bias: z.boolean().optional()
      .describe("A per-expert bias on the router's scores that only chooses experts (aux-loss-free balancing)"),
    shared_expert_d_ff: int(0, 1 << 20).default(0).describe('Width of a shared expert (Qwen2-MoE); 0 = none'),
    shared_expert_gate: z.boolean().default(false).describe('Sigmoid gate on the shared expert'),
    residual_mlp: z.boolean().default(false).describe('PR-MoE residual: a dense MLP added to the routed output'),
    aux_loss_coef: z.number().min(0).max(1000).default(0.01).describe('Switch load-balancing loss coefficient'),
    z_loss_coef: z.number().min(0).max(1000).default(0).describe('Router z-loss coefficient'),
    capacity_factor: z.number().positive().nullable().default(null)
      .describe('null: dropless; a number: GShard capacity with padding and dropping (baseline)'),
    rope_theta: z.number().min(1).max(1e12).default(10000).describe('RoPE base (mixtral)'),
    norm_eps: z.number().min(1e-12).max(1).default(1e-5).describe('Norm epsilon'),
    tie_embeddings: z.boolean().optional().describe('Share the token embedding with the output head'),
    qkv_bias: z.boolean().optional().describe('Bias on the qkv projection (Qwen2-MoE; gpt-moe always has biases)'),
    out_bias: z.boolean().optional()
      .describe('Add a bias on the attention out-projection (Qwen3-MoE attention_bias; gpt-moe and gpt-oss always have one)'),
    qk_norm: z.enum(['none', 'projection', 'head']).optional()
      .describe('RMSNorm on q and k before rope: over the whole projection (OLMoE), per head (Qwen3), or none'),
    clip_qkv: z.number().positive().nullable().optional()
      .describe('Clamp q, k and v to [-clip_qkv, clip_qkv] after the q/k norm (OLMoE); null: off'),
    init_std: z.number().min(0).max(10).default(0.02).describe('Initialisation standard deviation'),
    latent_attention: LatentAttentionSchema.optional().describe('Multi-head latent attention (DeepSeek-V2/V3)'),
    rope_scaling: RopeScalingSchema.optional().describe('YaRN rope scaling'),
    router: RouterConfigSchema.optional().describe("The router's scoring and top-k selection"),
  })
  .strict()

export const TrainConfigSchema = z
  .object({
    batch_size: int(1, 1 << 16).default(8).describe('Sequences per micro-batch'),
    seq_len: int(1, 1 << 20).default(256).describe('Tokens per sequence'),
    steps: int(0, 1 << 30).default(1000).describe('Optimizer steps'),
    grad_accum: int(1, 1 << 16).default(1).describe('Micro-batches per step'),
    lr: z.number().min(0).max(10).default(3e-4).describe('Peak learning rate'),
    min_lr: z.number().min(0).max(10).optional().describe('Learning rate at the end of the cosine decay (default lr / 10)'),
    warmup_steps: int(0, 1 << 30).default(100).describe('Linear warmup steps'),
    weight_decay: z.number().min(0).max(10).default(0.1).describe('AdamW decoupled weight decay (matrices only)'),
    beta1: z.number().min(0).max(0.999999).default(0.9),
    beta2: z.number().min(0).max(0.999999999).default(0.95),
    eps: z.number().positive().max(1).default(1e-8).describe('AdamW epsilon (> 0: with 0 any zero gradient makes NaN)'),
    grad_clip: z.number().min(0).max(1e9).default(1).describe('Global gradient-norm clip (0 = off)'),
    seed: int(0, Number.MAX_SAFE_INTEGER).default(1337).describe('Initialisation and data seed'),
    threads: int(1, 1024).default(2).describe('CPU threads of the engine'),
    checkpoint_every: int(0, 1 << 30).default(0).describe('Checkpoint every N steps (0 = only at the end)'),
    keep_checkpoints: int(0, 1 << 30).optional()
      .describe('Checkpoints kept on disk: after each save the oldest beyond this many are removed, the one just saved always kept (default 0 = keep every one)'),
    eval_every: int(0, 1 << 30).optional()
      .describe('Held-out loss every N steps and at the last (default 0 = never; needs dataset.eval; resident experts only)'),
    eval_batches: int(1, 1 << 16).optional().describe('Batches of the held-out data each evaluation reads (default 4)'),
    on_nonfinite: z
      .enum(['pause', 'stop', 'skip'])
      .default('pause')
      .describe('At a step whose loss or gradient norm is NaN or infinite: pause the run, stop it, or skip that update and go on (resident experts only)'),
    backend: z.enum(['cpu', 'cuda']).optional()
      .describe('Compute backend of the engine (default cpu); cuda needs a build with CUDA and a GPU, and trains once its self-test has passed on the machine'),
    allow_unvalidated_backend: z.boolean().optional()
      .describe('Train on a backend other than cpu even though its self-test (moe-engine-dev selftest --backend NAME) has not passed on this machine'),
    gemm: z.enum(['own', 'cublas', 'auto']).optional()
      .describe('The linear layers’ GEMMs on the cuda backend: own kernels (default), cuBLAS opened at run time (the run fails to start without it), or auto (cuBLAS where found, else own)'),
    compute_dtype: z.enum(['fp32', 'bf16']).default('fp32')
      .describe('GEMM precision: fp32, or bf16 operands with fp32 accumulation (fp32 master weights and AdamW)'),
    pack_frozen_bf16: z.boolean().optional()
      .describe('With compute_dtype bf16 on the cpu backend: keep frozen weights packed for the GEMMs, packed once instead of in every call (default true; about 4 more bytes per frozen linear parameter)'),
    balance_bias_rate: z.number().min(0).max(1).optional()
      .describe('Aux-loss-free load balancing (DeepSeek-V3): after each step every expert’s selection bias moves by this much toward its layer’s mean load; 0 = off, 1e-3 is Megatron’s default; needs model.selection_bias'),
  })
  .strict()

// Expert offload (docs/offload.md). Omitted or mode "none": every expert resident. "auto" is resolved by the
// host's planner before the engine starts; the engine only knows none / host / ssd (and puts the SSD file in the run directory itself).
export const OffloadConfigSchema = z
  .object({
    mode: z.enum(['auto', 'none', 'host', 'ssd']).default('none')
      .describe('Where expert state lives: none (resident), host memory, SSD behind a host cache, or auto (the planner picks the first that fits)'),
    device_budget_bytes: z.number().int().positive().nullable().default(null)
      .describe('Device tier budget; null: expert_slots decides (auto: the machine’s memory)'),
    expert_slots: int(1, 1 << 20).nullable().default(null)
      .describe('Experts on the device at once; null: as many as device_budget_bytes holds after the dense state and activations'),
    lookahead: int(0, 64).default(1).describe('Uploads issued ahead of the experts computing; 0 = no pipelining, upload when needed; above 1 the experts also compute in runs of up to this many (at most half the streaming slots), one grouped GEMM per run on a GPU'),
    pin_fraction: z.number().min(0).max(1).default(0.25)
      .describe('Share of the slots kept for the hottest experts (at least one slot always streams)'),
    pin_policy: z.enum(['previous', 'ema', 'none']).default('previous')
      .describe('What makes an expert hot: its tokens in the previous step, an EMA of them, or no pinning'),
    optimizer: z.enum(['expert', 'layer', 'delayed']).default('expert')
      .describe('Host AdamW per expert as its gradient lands, per layer, or delayed: ZeRO-Offload-style one-step-stale expert updates (ablation baseline, not exact)'),
    optimizer_overlap: z.boolean().default(true)
      .describe('Expert updates overlap the rest of the step; false: they run after the step and are waited for (ablation)'),
    copy_stream: z.enum(['auto', 'worker', 'inline', 'mapped']).default('auto')
      .describe('Where uploads run: a copy worker overlapping compute, inline on the compute thread, or nowhere (mapped: on the cpu backend the experts compute on their host copies in place and only gradients move); auto: mapped for the SSD tier on the cpu backend when the cache holds lookahead + 3 entries, inline for the host tier when the compute threads take every core (a worker would only compete with them), else the worker'),
    host_budget_bytes: z.number().int().positive().nullable().default(null)
      .describe('Host tier budget; null: the machine’s memory (SSD mode: sizes the cache when cache_experts is null)'),
    cache_policy: z.enum(['lru', 'lfu', 'next-use']).default('lru')
      .describe('SSD mode host cache eviction: least recently used (ES-MoE), MoESys Algorithm 2 frequency policy with hit threshold and decay, or next-use (the expert the pass order needs last)'),
    cache_experts: int(1, 1 << 24).nullable().default(null)
      .describe('SSD mode host cache entries (one expert’s weights, gradient and moments each); null: derived from host_budget_bytes'),
    lfu_threshold: int(1, 1e6).default(2).describe('lfu: hits before an expert may displace a cached one'),
    lfu_decay: z.number().gt(0).max(1).default(0.5).describe('lfu: factor applied to every hit count at each decay'),
    lfu_decay_every: int(1, 1e9).default(64).describe('lfu: expert fetches between decays'),
    prefetch: z.boolean().default(true).describe('SSD mode: read the next layer’s experts into the host cache ahead of use'),
  })
  .strict()

// A load-balance experiment: the engine replaces the router's top-k with seeded draws and keeps the
// rest of the step real. Omitted or distribution "none": the router routes; the engine gets the section only when on.
export const RoutingSkewConfigSchema = z
  .object({
    distribution: z.enum(['none', 'uniform', 'zipf', 'hot']).default('none')
      .describe("Experiment: replace the router's choices with seeded draws (not training a real router). none: the router routes; uniform, zipf or hot: experts drawn from that distribution"),
    zipf_s: z.number().min(0).max(10).default(1.2)
      .describe('zipf: expert rank r is drawn with weight 1/(r+1)^s (0 = uniform; larger = more skewed)'),
    hot_fraction: z.number().min(0).max(1).default(0.95)
      .describe('hot: share of tokens whose first choice is expert 0; their other choices are uniform over the rest'),
    seed: int(0, Number.MAX_SAFE_INTEGER).default(0).describe('Seed of the draws: the same seed gives every run the same routing'),
  })
  .strict()

// Expert placement across devices (docs/placement.md): the engine decides per step and MoE layer where
// each expert's rows run and runs them there, on D virtual devices (backends sharing this machine), recording
// the loads, time and bytes per device. One device (the default) places nothing; the engine gets the section only
// when experts run on the devices (more than one, or a pipeline on one).
export const PlacementConfigSchema = z
  .object({
    devices: int(1, 1024).default(1)
      .describe('Devices to run experts on (virtual devices sharing this machine; placement, time and bytes recorded per step). 1: no placement'),
    policy: z.enum(['static', 'greedy', 'least-loaded']).default('static')
      .describe('static: expert e on device e mod D; greedy: whole experts, heaviest first, each to the least-loaded device (ES-MoE); least-loaded: static homes, overloaded devices spill rows to the least-loaded ones (LLEP)'),
    lambda: z.number().min(1).max(10).default(1.3)
      .describe('least-loaded: rebalance a layer only when its max/mean device load exceeds this'),
    alpha: z.number().min(1).max(10).default(1.1)
      .describe('least-loaded: a device receiving spilled tokens is capped at alpha × the mean load'),
    min_tokens: int(1, 1 << 24).default(32)
      .describe('least-loaded: no piece of an expert smaller than this many tokens is spilled'),
    greedy_split: z.boolean().default(true)
      .describe('greedy: cut an expert heavier than a device’s fair share into pieces on several devices; false: whole experts only (ES-MoE)'),
    device_budget_bytes: z.number().int('must be a whole number of bytes').positive('must be a positive number of bytes')
      .max(Number.MAX_SAFE_INTEGER).nullable().default(null)
      .describe('Each device’s buffer budget (activations, weights received, partitions in flight); null: unlimited'),
    threads_per_device: int(1, 256).nullable().default(null)
      .describe('Compute threads of each device’s backend; null: the run’s threads split across the devices (at least 1)'),
  })
  .strict()

// The MoE layers' expert phase pipelined in n micro-batches (MPipeMoE, docs/placement.md), with an optional
// memory-reuse strategy. partitions 1 with memory_reuse off (the default) is no pipelining, and the engine then
// gets no section. Not with offload for now (see checkDevices).
const PARTITIONS_MESSAGE = 'must be a whole number in [1, 64] or "auto"'
export const PipelineConfigSchema = z
  .object({
    partitions: z.union([z.number().int(PARTITIONS_MESSAGE).min(1, PARTITIONS_MESSAGE).max(64, PARTITIONS_MESSAGE), z.literal('auto')], {
      error: PARTITIONS_MESSAGE,
    }).default(1)
      .describe('Micro-batches n each MoE layer’s tokens are split into, overlapping dispatch, compute and return; auto: chosen online by Algorithm 1 from the candidates. 1: no pipelining'),
    candidates: z.array(int(1, 64), { error: 'must list partition counts, each a whole number in [1, 64]' })
      .min(1, 'must list at least one partition count').default([1, 2, 4, 8])
      .describe('auto: the partition counts n Algorithm 1 tries'),
    memory_reuse: z.enum(['off', 'auto', 'S1', 'S2', 'S3', 'S4']).default('off')
      .describe('How partitions share activation buffers: off (each keeps its own), S1–S4 (offload or re-send the dispatched input, recompute or offload the hidden activations; Table II), or auto (the cheapest by equation 10 on this machine)'),
  })
  .strict()

/** The pipeline changes how experts run: more than one partition, or a memory-reuse strategy (as the engine's engaged()). */
export function pipelineEngaged(p: PipelineConfig | undefined): boolean {
  return p !== undefined && (p.partitions !== 1 || p.memory_reuse !== 'off')
}

/** Experts run through the engine's devices (placement across more than one, or pipelined on one). */
export function runsOnDevices(c: { placement?: PlacementConfig; pipeline?: PipelineConfig }): boolean {
  return (c.placement?.devices ?? 1) > 1 || pipelineEngaged(c.pipeline)
}

/** The engine's rule (config.cpp): devices and pipelining only without offload, for now; named by placement.devices. */
export const OFFLOAD_DEVICES_MESSAGE =
  'experts run on several devices or pipelined only without offload for now; set offload.mode to "none", or placement.devices to 1 and drop the pipeline section (partitions 1, memory_reuse off)'

function checkOffload(c: { train: TrainConfig; offload?: OffloadConfig; placement?: PlacementConfig; pipeline?: PipelineConfig }, ctx: z.RefinementCtx): void {
  const o = c.offload
  if (!o || o.mode === 'none') return
  // "auto" may resolve to resident; the host checks what it resolves to (planner/resolve.ts).
  if (o.mode !== 'auto' && runsOnDevices(c))
    ctx.addIssue({ code: 'custom', path: ['placement', 'devices'], message: `${o.mode} offload: ${OFFLOAD_DEVICES_MESSAGE}` })
  const issue = (key: keyof OffloadConfig, message: string) => ctx.addIssue({ code: 'custom', path: ['offload', key], message })
  if ((o.mode === 'host' || o.mode === 'ssd') && o.expert_slots === null && o.device_budget_bytes === null)
    issue('expert_slots', `${o.mode} offload needs expert_slots or device_budget_bytes`)
  if (o.mode === 'ssd' && o.cache_experts === null && o.host_budget_bytes === null)
    issue('cache_experts', 'SSD offload needs cache_experts or host_budget_bytes')
  if (o.mode === 'ssd' && o.optimizer === 'delayed') issue('optimizer', 'delayed updates are host-tier only')
}

export const RunConfigSchema = z
  .object({
    model: ModelConfigSchema,
    train: TrainConfigSchema,
    offload: OffloadConfigSchema.optional(),
    routing_skew: RoutingSkewConfigSchema.optional(),
    placement: PlacementConfigSchema.optional(),
    pipeline: PipelineConfigSchema.optional(),
    finetune: FinetuneConfigSchema.nullable().optional()
      .describe('Which parameters train (full, LoRA or expert-specialised fine-tuning); absent or null: all of them'),
  })
  .strict()
  .superRefine((c, ctx) => {
    const m = c.model
    if (m.head_dim == null && m.d_model % m.n_heads !== 0)
      ctx.addIssue({ code: 'custom', path: ['model', 'n_heads'], message: `must divide d_model (${m.d_model})` })
    const kv = m.n_kv_heads ?? m.n_heads
    if (m.n_heads % kv !== 0)
      ctx.addIssue({ code: 'custom', path: ['model', 'n_kv_heads'], message: `must divide n_heads (${m.n_heads})` })
    // The family's rules, as the engine checks them (native/engine/model/features.cpp).
    const family = modelFamily(m.arch).features
    if (family.attention === 'mha' && kv !== m.n_heads)
      ctx.addIssue({ code: 'custom', path: ['model', 'n_kv_heads'], message: `${m.arch} needs n_kv_heads == n_heads` })
    if (m.latent_attention) {
      if (family.position !== 'rope' || family.linear_bias || family.out_bias || m.out_bias === true || family.attention_sinks)
        ctx.addIssue({ code: 'custom', path: ['model', 'latent_attention'], message: `needs a RoPE family without attention biases or sinks, not ${m.arch}` })
      else if ((m.sliding_window ?? 0) > 0)
        ctx.addIssue({ code: 'custom', path: ['model', 'sliding_window'], message: 'latent attention has no sliding window' })
      else if (kv !== m.n_heads)
        ctx.addIssue({ code: 'custom', path: ['model', 'n_kv_heads'], message: 'latent attention needs n_kv_heads == n_heads' })
      if (m.latent_attention.qk_rope_head_dim % 2 !== 0)
        ctx.addIssue({ code: 'custom', path: ['model', 'latent_attention', 'qk_rope_head_dim'], message: 'must be even' })
    } else if (m.rope_scaling && family.position !== 'rope') {
      ctx.addIssue({ code: 'custom', path: ['model', 'rope_scaling'], message: `needs RoPE positions; ${m.arch} has learned positions` })
    }
    if (m.router && m.router.topk_group > m.router.n_group)
      ctx.addIssue({ code: 'custom', path: ['model', 'router', 'topk_group'], message: `exceeds n_group (${m.router.n_group})` })
    const hs = headSize(m)
    if (family.position === 'rope' && !m.latent_attention && Number.isInteger(hs) && hs % 2 !== 0)
      ctx.addIssue({ code: 'custom', path: ['model', m.head_dim == null ? 'n_heads' : 'head_dim'], message: `RoPE needs an even head size (${hs})` })
    const dense = m.dense_layers ?? []
    dense.forEach((l, i) => {
      if (l >= m.n_layers || (i > 0 && l <= dense[i - 1]!))
        ctx.addIssue({ code: 'custom', path: ['model', 'dense_layers', i], message: `must be an increasing layer index below n_layers (${m.n_layers})` })
    })
    if ((m.qk_norm ?? family.qk_norm) !== 'none' && family.norm !== 'rmsnorm')
      ctx.addIssue({ code: 'custom', path: ['model', 'qk_norm'], message: `q/k norm is an RMSNorm; ${m.arch} uses LayerNorm` })
    const sliding = m.sliding_layers ?? []
    sliding.forEach((l, i) => {
      if (l >= m.n_layers || (i > 0 && l <= sliding[i - 1]!))
        ctx.addIssue({ code: 'custom', path: ['model', 'sliding_layers', i], message: `must be an increasing layer index below n_layers (${m.n_layers})` })
    })
    if ((m.sliding_window ?? 0) > 0 && sliding.length === 0)
      ctx.addIssue({ code: 'custom', path: ['model', 'sliding_layers'], message: 'name the layers that use sliding_window' })
    if (!(m.sliding_window ?? 0) && sliding.length > 0)
      ctx.addIssue({ code: 'custom', path: ['model', 'sliding_window'], message: 'the sliding_layers need a window' })
    if ((m.sliding_window ?? 0) > 0 && family.position !== 'rope')
      ctx.addIssue({ code: 'custom', path: ['model', 'sliding_window'], message: 'needs rotary positions' })
    if (family.linear_bias && m.qkv_bias === false)
      ctx.addIssue({ code: 'custom', path: ['model', 'qkv_bias'], message: `${m.arch} always has biases; remove the field` })
    const moeLayers = moeLayerIndexes(m).length
    if (moeLayers === 0)
      ctx.addIssue({ code: 'custom', path: ['model', dense.length ? 'dense_layers' : 'moe_every'], message: 'leaves no MoE layer' })
    const experts = Array.isArray(m.n_experts) ? m.n_experts : [m.n_experts]
    if (Array.isArray(m.n_experts) && m.n_experts.length !== moeLayers)
      ctx.addIssue({ code: 'custom', path: ['model', 'n_experts'], message: `needs one entry per MoE layer (${moeLayers})` })
    if (experts.some((e) => m.top_k > e))
      ctx.addIssue({ code: 'custom', path: ['model', 'top_k'], message: 'exceeds the experts of a layer' })
    if (m.shared_expert_gate && m.shared_expert_d_ff === 0)
      ctx.addIssue({ code: 'custom', path: ['model', 'shared_expert_gate'], message: 'needs shared_expert_d_ff > 0' })
    if (c.train.seq_len > m.max_seq_len)
      ctx.addIssue({ code: 'custom', path: ['train', 'seq_len'], message: `exceeds model.max_seq_len (${m.max_seq_len})` })
    if ((c.train.balance_bias_rate ?? 0) > 0 && !m.selection_bias)
      ctx.addIssue({ code: 'custom', path: ['train', 'balance_bias_rate'], message: 'needs model.selection_bias (the bias it moves)' })
    if (c.train.gemm === 'cublas' && c.train.backend !== 'cuda')
      ctx.addIssue({ code: 'custom', path: ['train', 'gemm'], message: 'cublas needs train.backend "cuda" (other backends have only their own GEMMs)' })
    if ((c.train.eval_every ?? 0) > 0 && c.offload && c.offload.mode !== 'none')
      ctx.addIssue({ code: 'custom', path: ['train', 'eval_every'], message: 'evaluation runs with resident experts only for now (offload.mode "none")' })
    if (c.train.min_lr !== undefined && c.train.min_lr > c.train.lr)
      ctx.addIssue({ code: 'custom', path: ['train', 'min_lr'], message: 'must not exceed lr' })
    checkOffload(c, ctx)
    if (c.finetune) checkFinetuneExperts(c.model, c.finetune, ctx)
    if (c.finetune) checkFinetuneSupported(c, ctx)
  })

/** The engine's rule (config.cpp): a finetune section runs its experts on one device, for now (offloaded or not). */
export const FINETUNE_DEVICES_MESSAGE =
  'experts on several devices or pipelined (placement.devices > 1, pipeline) with a finetune section are not supported yet; use one device and drop the pipeline section'

// What the engine refuses with a fine-tune (check_finetune_supported in config.cpp), named on the finetune fields
// the Method section shows. Expert offload (host, SSD, auto) runs with any finetune section.
function checkFinetuneSupported(c: { model: ModelConfig; placement?: PlacementConfig; pipeline?: PipelineConfig },
  ctx: z.RefinementCtx): void {
  if (runsOnDevices(c)) ctx.addIssue({ code: 'custom', path: ['finetune'], message: FINETUNE_DEVICES_MESSAGE })
}

// finetune.experts names MoE layers of this model and experts each of them has, once each.
function checkFinetuneExperts(m: ModelConfig, f: FinetuneConfig, ctx: z.RefinementCtx): void {
  const layers = moeLayerIndexes(m)
  for (const [key, ids] of Object.entries(f.experts ?? {})) {
    const at = layers.indexOf(Number(key))
    const path = ['finetune', 'experts', key]
    if (at < 0) {
      ctx.addIssue({ code: 'custom', path, message: `layer ${key} is not an MoE layer (MoE layers: ${layers.join(', ')})` })
      continue
    }
    const count = Array.isArray(m.n_experts) ? m.n_experts[at] ?? 0 : m.n_experts
    ids.forEach((e, i) => {
      if (e >= count) ctx.addIssue({ code: 'custom', path: [...path, i], message: `expert ${e} does not exist (layer ${key} has ${count})` })
      else if (ids.indexOf(e) !== i) ctx.addIssue({ code: 'custom', path: [...path, i], message: `expert ${e} is listed twice` })
    })
  }
}

export type ModelConfig = z.infer<typeof ModelConfigSchema>
export type TrainConfig = z.infer<typeof TrainConfigSchema>
export type OffloadConfig = z.infer<typeof OffloadConfigSchema>
export type RoutingSkewConfig = z.infer<typeof RoutingSkewConfigSchema>
export type PlacementConfig = z.infer<typeof PlacementConfigSchema>
export type PipelineConfig = z.infer<typeof PipelineConfigSchema>
export type RunConfig = z.infer<typeof RunConfigSchema>
export type { FinetuneConfig }
