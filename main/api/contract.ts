// The one typed contract between renderer, preload and main: every request with its params and
// result, and every pushed event. Both transports (Electron IPC and the browser-mode WebSocket)
// derive their channel names from these keys and validate every input against these schemas.
import { z } from 'zod'

import { RunConfigSchema } from './config'
import { ModelCardSchema } from './model-card'
import { HF_EXPERT_LAYOUTS, HF_MODEL_TYPE_NAMES } from './model-families'
import { ALWAYS_FIELD_NAMES, STEP_FIELDS, type AlwaysFieldName, type MeasuredFieldName } from './step-fields'

/** What a checkpoint export writes: the whole model, or a LoRA run's PEFT adapter. */
export const EXPORT_FORMATS = ['merged', 'adapter'] as const
export type ExportFormat = (typeof EXPORT_FORMATS)[number]
export const RunIdSchema = z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'a run id: lowercase letters, digits and dashes')
export const RunStatusSchema = z.enum(['queued', 'running', 'paused', 'stopping', 'stopped', 'finished', 'failed'])

// Paths cross the boundary absolute: a relative one would resolve against whatever directory the host process
// happens to run in (the server's checkout, say), not anything the user chose. Pickers produce absolute paths.
const isAbsolutePath = (p: string) => p.startsWith('/') || /^[A-Za-z]:[\\/]/.test(p) || p.startsWith('\\\\')
export const AbsolutePathSchema = z
  .string()
  .min(1)
  .refine(isAbsolutePath, 'must be an absolute path (a relative one would resolve against the host process’s working directory)')

/** A run's dataset as recorded and reported (what was stored is shown as it is). */
// How a dataset is read, beyond its files: the same fields in a request and in a stored run.
const datasetOptions = <P extends z.ZodType<string>>(path: P) => ({
  overflow: z.enum(['keep', 'truncate', 'drop']).optional()
    .describe('JSONL records longer than train.seq_len: kept whole (spanning rows), truncated to it, or dropped; default keep'),
  packing: z.boolean().optional()
    .describe('JSONL records back to back (true, the default), or each starting a row of the batch, padded with masked tokens'),
  eval: z
    .union([
      z.object({ fraction: z.number().gt(0).lt(1).describe('the last share of the tokens, held out') }).strict(),
      z.object({ path: path.describe('a file of its own, read like the data file') }).strict(),
    ])
    .optional()
    .describe('Held-out data for train.eval_every: a fraction of this file, or another file'),
})

// A stored run's dataset: paths as recorded (runs from before absolute paths were required included).
export const StoredDatasetSchema = z
  .object({ path: z.string().min(1), tokenizer: z.string().min(1).optional(), ...datasetOptions(z.string().min(1)) })
  .strict()

export const DatasetSpecSchema = z
  .object({
    path: AbsolutePathSchema.describe('A .txt, .jsonl ({"text"}, {"prompt","completion"}, chat {"messages"}, ShareGPT {"conversations"} or Alpaca {"instruction","output"}) or token shard (.bin) file'),
    tokenizer: AbsolutePathSchema.optional().describe('A Hugging Face tokenizer.json; default: bytes (vocab 256)'),
    ...datasetOptions(AbsolutePathSchema),
  })
  .strict()

// Expert-specialised fine-tuning's measurement (the engine's moe_engine_measure_experts): per MoE layer each routed
// expert's share of the gate scores and of the routed tokens, and the experts chosen by `score` at `threshold`.
export const ExpertSharesSchema = z.object({
  layers: z.array(z.number().int()).describe('the model layer index of each MoE layer'),
  gate: z.array(z.array(z.number())).describe('[MoE layer][expert] share of the gate scores (each layer sums to 1)'),
  tokens: z.array(z.array(z.number())).describe('[MoE layer][expert] share of the routed tokens (each layer sums to 1)'),
  batches: z.number().int().describe('batches measured'),
  tokensSeen: z.number().int(),
  threshold: z.number(),
  score: z.enum(['gate', 'tokens']),
  experts: z.record(z.string(), z.array(z.number().int())).describe('per model layer index, the chosen experts (finetune.experts)'),
})
export type ExpertShares = z.output<typeof ExpertSharesSchema>

export const RunSpecSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    config: RunConfigSchema,
    dataset: DatasetSpecSchema,
    init: AbsolutePathSchema.optional().describe('Start from the weights of this checkpoint directory (ours or Hugging Face)'),
    expertShares: ExpertSharesSchema.optional().describe('the ESFT measurement the chosen experts came from, kept with the run'),
  })
  .strict()
  .superRefine((spec, ctx) => {
    if ((spec.config.train.eval_every ?? 0) > 0 && !spec.dataset.eval)
      ctx.addIssue({ code: 'custom', path: ['dataset', 'eval'], message: 'train.eval_every needs held-out data: a fraction of the data file or an evaluation file' })
  })

export const RunSummarySchema = z.object({
  id: RunIdSchema,
  name: z.string(),
  status: RunStatusSchema,
  createdAt: z.number(),
  startedAt: z.number().nullable(),
  finishedAt: z.number().nullable(),
  step: z.number().int(),
  totalSteps: z.number().int(),
  lastLoss: z.number().nullable(),
  tokensPerSec: z.number().nullable(),
  model: z.string().describe('Short model description, e.g. "mixtral L4 d256 8x top-2"'),
  strategy: z.string().describe('Short strategy description'),
  error: z.string().nullable(),
})

export const RunEventSchema = z.object({
  runId: RunIdSchema,
  at: z.number(),
  kind: z.enum(['queued', 'started', 'paused', 'resumed', 'checkpoint', 'stopped', 'finished', 'failed', 'log']),
  message: z.string(),
})

export const CheckpointSchema = z.object({
  runId: RunIdSchema,
  step: z.number().int(),
  path: z.string(),
  createdAt: z.number(),
  bytes: z.number(),
})

const OffloadRequestSchema = z.enum(['auto', 'none', 'host', 'ssd']).describe('the config’s offload.mode')
const OffloadModeSchema = z.enum(['none', 'host', 'ssd'])

// What the host decided for a run before its engine started (auto resolved), kept with the run.
export const ResolvedOffloadSchema = z.object({
  requested: OffloadRequestSchema,
  mode: OffloadModeSchema,
  deviceBudgetBytes: z.number().nullable(),
  hostBudgetBytes: z.number().nullable(),
  slots: z.number().int().nullable(),
  cacheExperts: z.number().int().nullable(),
  explanation: z.string(),
})

export const RunDetailSchema = z.object({
  summary: RunSummarySchema,
  config: RunConfigSchema,
  dataset: StoredDatasetSchema,
  init: z.string().nullable(),
  offload: ResolvedOffloadSchema.nullable().describe('the offload the run trains with; null: resident (runs from before offload)'),
  expertShares: ExpertSharesSchema.nullable().optional().describe('the ESFT measurement stored with the run; null: none'),
  parameters: z.object({
    trainable: z.number().describe('parameters that train: base tensors of the trained groups and LoRA adapters'),
    adapters: z.number(),
    total: z.number().describe('the base model’s parameters'),
  }).optional().describe('what the run’s finetune method trains'),
  events: z.array(RunEventSchema),
  checkpoints: z.array(CheckpointSchema),
})

// The scalar metrics of a step: the engine's fields (step-fields.ts) but the step number, and the store's
// tokens_per_s after tokens. Offload-only metrics are null for runs whose steps did not record them.
export type ScalarMetric = MeasuredFieldName | 'tokens_per_s'
const SCALAR_METRICS = STEP_FIELDS.flatMap((f): ScalarMetric[] =>
  f.name === 'step' ? [] : f.name === 'tokens' ? [f.name, 'tokens_per_s'] : [f.name])
export const ScalarMetricSchema = z.enum(SCALAR_METRICS as [ScalarMetric, ...ScalarMetric[]])

/** The metrics a live step carries: those the engine records on every step, and tokens_per_s. */
export const LIVE_METRICS = SCALAR_METRICS.filter((m): m is Exclude<AlwaysFieldName, 'step'> | 'tokens_per_s' =>
  m === 'tokens_per_s' || (ALWAYS_FIELD_NAMES as readonly string[]).includes(m))
type LiveMetric = (typeof LIVE_METRICS)[number]

export const StepMetricsSchema = z.object({
  step: z.number().int(),
  wallTime: z.number().describe('ms since the epoch when the step ended'),
  // null where the step's value was not finite (a diverged step): JSON cannot carry NaN or infinities.
  ...(Object.fromEntries(LIVE_METRICS.map((m) => [m, z.number().nullable()])) as Record<LiveMetric, z.ZodNullable<z.ZodNumber>>),
})

export const SeriesSchema = z.object({
  step: z.array(z.number()),
  wallTime: z.array(z.number()),
  values: z
    .record(z.string(), z.array(z.number().nullable()))
    .describe('per metric, aligned with step; null where the value was not finite (a diverged run)'),
})

export const ExpertLoadSchema = z.object({
  layer: z.number().int(),
  experts: z.number().int(),
  steps: z.array(z.number().int()),
  counts: z.array(z.number()).describe('steps.length × experts, row-major (tokens per expert per step)'),
  bias: z
    .array(z.number())
    .nullish()
    .describe('steps.length × experts like counts: each expert’s router selection bias after the step (bucket mean); null or absent: the model has none'),
})

export const PresetSchema = z.object({ name: z.string(), description: z.string(), config: RunConfigSchema })

// How one MoE layer's expert phase ran on the devices at one step (forward + backward, docs/placement.md).
export const LayerExecutionSchema = z.object({
  deviceBusyMs: z.array(z.number()).describe('each device’s time on its streams (compute, copies; CPU time on virtual devices)'),
  criticalMs: z.number().describe('the slowest device’s pipelined time: what the expert phase takes on D devices (measured)'),
  wallMs: z.number().describe('wall time of the expert phase in this process (the virtual devices share its cores)'),
  predictedMs: z.number().describe('equation 10’s time for the chosen memory-reuse strategy; 0 without one'),
  tokenBytes: z.number().describe('token rows sent between devices: dispatch, return, re-sends'),
  weightBytes: z.number().describe('weights sent to experts’ guest devices and gradients sent home'),
  offloadBytes: z.number().describe('activations offloaded to the host and restored by the memory-reuse strategy'),
  partitions: z.number().int().describe('pipeline micro-batches n'),
  reuseStrategy: z.number().int().min(0).max(4).describe('memory reuse: 0 none, 1..4 S1..S4'),
})

// One MoE layer's placement across devices at one step (docs/placement.md), as the engine decided it.
export const DevicePlacementSchema = z.object({
  loadBefore: z.array(z.number()).describe('tokens per device with every expert on its static home (e mod D)'),
  loadAfter: z.array(z.number()).describe('tokens per device as the policy placed them, a split expert counted where each piece runs'),
  imbalanceBefore: z.number().describe('max/mean of loadBefore (1: balanced)'),
  imbalanceAfter: z.number().describe('max/mean of loadAfter'),
  spilledTokens: z.number().int().describe('tokens computed away from their expert’s home device'),
  movedExperts: z.number().int().describe('weight copies the placement needs: (expert, device) pairs away from home'),
  execution: LayerExecutionSchema.nullable().describe('how the layer ran on the devices; null: not recorded (older runs)'),
})

// Every per-layer array the engine records for one step (null where the run did not record it: tiers and
// pins without offload, placement and devices with one device).
export const StepLoadsSchema = z.object({
  step: z.number().int(),
  layers: z.array(
    z.object({
      tokens: z.array(z.number()).describe('tokens per expert'),
      placement: z.array(z.number()).nullable().describe('device of each expert’s first rows (-1: no rows)'),
      tiers: z.array(z.number()).nullable().describe('tier of each expert: 0 device, 1 host, 2 SSD'),
      pins: z.array(z.number()).nullable().describe('1 where the expert is pinned'),
      spilled: z.array(z.number()).nullable().describe('tokens of each expert spilled to another device'),
      selectionBias: z
        .array(z.number())
        .nullish()
        .describe('each expert’s router selection bias after the step (load balancing moves it); null or absent: the model has none'),
      devices: DevicePlacementSchema.nullable().describe('the placement across devices; null: experts ran in the MoE layer (one device, no pipeline)'),
    }),
  ),
  devicePeakBytes: z.array(z.number()).nullable().describe('the largest each device’s buffers grew to at the step; null: not recorded'),
})

// One MoE layer's placement over a step range, on one step axis (downsampled like metrics.series).
export const PlacementSeriesSchema = z.object({
  layer: z.number().int(),
  steps: z.array(z.number().int()).describe('empty when the run records no placement (one device)'),
  imbalanceBefore: z.array(z.number()).describe('max/mean tokens per device with the static homes'),
  imbalanceAfter: z.array(z.number()).describe('max/mean tokens per device after the policy'),
  spilledTokens: z.array(z.number()),
  movedExperts: z.array(z.number()),
  criticalMs: z.array(z.number().nullable()).describe('the layer’s measured critical time on the devices; null where not recorded'),
  predictedMs: z.array(z.number().nullable()).describe('equation 10’s prediction for the layer; 0 without memory reuse, null where not recorded'),
})

export const HardwareSchema = z.object({
  cpuModel: z.string(),
  cpus: z.number().int(),
  cpuFeatures: z.array(z.string()).describe('SIMD features the engine dispatches on (amx_bf16, avx512f, avx512_bf16, avx2, ...)'),
  memoryBytes: z.number(),
  freeMemoryBytes: z.number(),
  disks: z.array(z.object({ path: z.string(), totalBytes: z.number(), freeBytes: z.number() })),
  gpus: z.array(z.object({ name: z.string(), memoryBytes: z.number() })),
  backends: z.array(z.string()).describe('engine backends usable on this machine'),
  engineBackends: z.array(z.object({
    name: z.string(),
    usable: z.boolean(),
    whyNot: z.string().describe('why it cannot run here; empty when usable'),
    kernels: z.string().describe('the kernels it picks on this machine, e.g. "sgemm avx512, bf16 gemm amx"; empty when not usable'),
    bf16Native: z.boolean().describe('whether bf16 compute runs on bf16 units here (bf16 instructions, tensor cores); false where it computes the same bits on fp32 arithmetic, which is then not faster than fp32, or cannot run'),
  })).describe('every backend built into the engine; empty when the engine could not be loaded'),
  engineError: z.string().nullable().describe('why the engine could not be asked (its addon failed to load); null when it answered'),
})

export const TierBytesSchema = z.object({
  tier: z.enum(['device', 'host', 'ssd']),
  params: z.number(),
  grads: z.number(),
  optimizer: z.number(),
  activations: z.number(),
  buffers: z.number(),
  total: z.number(),
  budget: z.number().nullable(),
})

const FinetuneTierSchema = z.object({
  tier: z.enum(['device', 'host', 'ssd']),
  trainable: z.number().describe('fp32 masters of what trains (base tensors and adapters)'),
  grads: z.number(),
  optimizer: z.number().describe('two AdamW moments of what trains'),
  frozen: z.number().describe('frozen base weights: no gradient, no moments'),
  total: z.number(),
})

export const FinetuneVerdictSchema = z.object({
  method: z.enum(['none', 'full', 'lora', 'esft']),
  counts: z.object({
    trainableBase: z.number(), adapters: z.number(), trainable: z.number(), frozen: z.number(), base: z.number(),
  }),
  frozenDtype: z.enum(['fp32', 'bf16']),
  tiers: z.array(FinetuneTierSchema),
  fullStateBytes: z.number().describe('parameter-state bytes of training every parameter'),
  stateBytes: z.number().describe('this method’s parameter-state bytes'),
})

export const PlanSchema = z.object({
  requested: OffloadRequestSchema,
  mode: OffloadModeSchema.describe('where expert state lives: resident (none), host memory, or SSD behind a host cache'),
  fits: z.boolean(),
  tiers: z.array(TierBytesSchema),
  paramCount: z.number(),
  expertParamCount: z.number(),
  expertBytes: z.number().describe('fp32 bytes of the largest routed expert, tensors padded as the engine lays them out'),
  slots: z.number().int().nullable().describe('expert slots on the device (offloaded modes)'),
  cacheExperts: z.number().int().nullable().describe('host cache entries (SSD mode)'),
  formulas: z.array(z.string()).describe('how each tier’s bytes are computed, with this config’s numbers'),
  explanation: z.string().describe('why this mode, or which tier is short by how many bytes and what budget would fit'),
  finetune: FinetuneVerdictSchema.nullable().optional()
    .describe('the config’s finetune method: what trains and its parameter state per tier (null: no finetune section)'),
})

export const FileEntrySchema = z.object({ name: z.string(), kind: z.enum(['file', 'dir']), bytes: z.number() })

export const ValidationIssueSchema = z.object({ path: z.string(), message: z.string() })

const noParams = z.object({}).strict()
const byRun = z.object({ id: RunIdSchema }).strict()

const bytesOrNull = z.number().nonnegative().nullable()
// A run's totals over all its steps (Compare's summary); null where the run never recorded the quantity.
export const RunTotalsSchema = z.object({
  steps: z.number().int().nonnegative(),
  peakBytes: z.object({ device: bytesOrNull, host: bytesOrNull, ssd: bytesOrNull }).describe('peak booking per memory tier (offloaded runs)'),
  bytesMoved: bytesOrNull.describe('offloadBytes + placementBytes'),
  offloadBytes: bytesOrNull.describe('host↔device copies and SSD reads and writes'),
  placementBytes: bytesOrNull.describe('tokens, weights and offloaded state exchanged between placement devices'),
})
export type RunTotals = z.infer<typeof RunTotalsSchema>

export type DatasetSpec = z.infer<typeof DatasetSpecSchema>
// The first records of a dataset as training sees them (main/host/datasets/preview.ts).
export const DataPreviewSchema = z.object({
  template: z.string().nullable().describe('where the chat template came from; null: the tokenizer has none'),
  records: z.array(
    z.object({
      line: z.number().int(),
      format: z.enum(['text', 'pair', 'chat']),
      tokens: z.number().int().describe('with the separator'),
      overLength: z.boolean().describe('longer than the run’s seq_len'),
      segments: z.array(z.object({ text: z.string(), trained: z.boolean(), tokens: z.number().int() })),
    }),
  ),
})
export type DataPreview = z.infer<typeof DataPreviewSchema>

// Serving hints from a run's recorded expert loads (main/host/serving/hints.ts).
export const ServingHintsParamsSchema = z
  .object({
    id: RunIdSchema,
    fromStep: z.number().int().min(1).optional().describe('first step of the range; default: lastSteps before toStep'),
    toStep: z.number().int().min(1).optional().describe('last step of the range; default: the run’s last step'),
    lastSteps: z.number().int().min(1).max(2000).default(100),
    vramBytes: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).default(8 * 2 ** 30)
      .describe('llama.cpp: GPU memory for expert tensors'),
    bytesPerParam: z.number().positive().max(8).default(2).describe('llama.cpp: bytes per expert parameter in the GGUF (2: f16/bf16; about 0.56: Q4_K)'),
    pinSlots: z.number().int().min(0).max(1 << 20).optional().describe('hot experts to list; default: the run’s pinned slots'),
    pinPolicy: z.enum(['previous', 'ema', 'sum']).optional().describe('default: the run’s pin policy (sum for a run without pinning)'),
  })
  .strict()
export type ServingHintsParams = z.infer<typeof ServingHintsParamsSchema>
export const ServingHintsSchema = z.object({
  range: z.object({ fromStep: z.number().int(), toStep: z.number().int() }),
  sglang: z.object({ logical_count: z.array(z.array(z.number())) }),
  llamaCpp: z.object({ gpuLayers: z.array(z.number().int()), gpuBytes: z.number(), trafficOnGpu: z.number(), args: z.string() }),
  hotExperts: z.object({
    policy: z.enum(['previous', 'ema', 'sum']),
    pinSlots: z.number().int(),
    layers: z.array(z.object({ layer: z.number().int(), experts: z.array(z.number().int()), share: z.number() })),
  }),
  usage: z.object({ sglang: z.string(), llamaCpp: z.string(), hotExperts: z.string() }),
})
export type ServingHints = z.infer<typeof ServingHintsSchema>
const ok = z.object({ ok: z.literal(true) })

// Request name -> params schema and result schema.
/** One MoE layer of a run over an optional step range: what the per-layer metrics requests take. */
const LayerStepRange = z.object({
  id: RunIdSchema,
  layer: z.number().int().min(0),
  fromStep: z.number().int().min(0).optional(),
  toStep: z.number().int().min(0).optional(),
})

// Try it: generation from a model folder or a run's checkpoint, with the model's own chat template.
export const ChatMessageSchema = z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string() }).strict()
export const ChatSamplingSchema = z
  .object({
    temperature: z.number().min(0).max(10).default(0).describe('0: greedy (the most likely token)'),
    topK: z.number().int().min(0).default(0).describe('only the K most likely tokens; 0: all'),
    topP: z.number().gt(0).max(1).default(1).describe('only the most likely tokens whose probability reaches P; 1: all'),
    seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0).describe('the same seed draws the same tokens'),
    maxTokens: z.number().int().min(1).max(8192).default(128),
  })
  .strict()
export const ChatModelSchema = z.union([
  z
    .object({
      dir: AbsolutePathSchema.describe('a Hugging Face model folder, one of our checkpoints, or a PEFT adapter folder'),
      base: AbsolutePathSchema.optional()
        .describe('the base model folder of a PEFT adapter folder; default: the one its adapter_config.json names (base_model_name_or_path)'),
    })
    .strict(),
  z
    .object({
      runId: RunIdSchema,
      checkpoint: z
        .union([z.literal('base'), z.literal('latest'), z.number().int().min(0)])
        .default('latest')
        .describe('base: the weights the run started from (its init); latest or a step: a checkpoint of the run'),
    })
    .strict(),
])
export const ChatExpertHomeSchema = z.enum(['resident', 'host', 'ssd'])
export const ChatPrecisionSchema = z
  .enum(['fp32', 'bf16'])
  .describe('fp32: the weights as stored, computed in fp32; bf16: the linear layers on bf16 weights with fp32 accumulation, as a bf16 run computes (about half the memory, and faster decoding where the CPU has bf16 units)')
export const ChatStartedSchema = z.object({
  id: z.string(),
  modelDir: z.string(),
  label: z.string().describe('what answers, e.g. "run abc step 40" or the folder'),
  promptTokens: z.number().int(),
  template: z.string().nullable().describe('where the chat template came from; null: the messages were joined as plain text'),
  stopTokens: z.array(z.number().int()),
})
export const ChatTokenEventSchema = z.object({
  id: z.string(),
  index: z.number().int().describe('0-based index of the generated token'),
  token: z.number().int(),
  text: z.string().describe('the text this token added (may be empty while a multi-byte character is incomplete)'),
  layers: z.array(z.number().int()).describe('the model layer of each MoE layer'),
  experts: z.array(z.array(z.number().int())).describe('[MoE layer][k]: the experts that computed the position this token was sampled from'),
})
export const ChatDoneEventSchema = z.object({
  id: z.string(),
  reason: z.enum(['stop', 'max_tokens', 'length', 'cancelled', 'failed']),
  error: z.string().nullable(),
  tokens: z.number().int(),
  text: z.string(),
  tokensPerSec: z.number().nullable(),
})

export const requests = {
  'runs.list': { params: noParams, result: z.array(RunSummarySchema) },
  'runs.get': { params: byRun, result: RunDetailSchema },
  'runs.create': { params: z.object({ spec: RunSpecSchema }).strict(), result: RunSummarySchema },
  'runs.pause': { params: byRun, result: ok },
  'runs.resume': { params: byRun, result: ok },
  'runs.stop': { params: byRun, result: ok },
  'runs.delete': { params: byRun, result: ok },
  'runs.checkpoint': { params: byRun, result: ok },
  'runs.restart': {
    params: byRun.describe('continue a stopped or failed run from its latest checkpoint'),
    result: RunSummarySchema,
  },
  'metrics.series': {
    params: z
      .object({
        id: RunIdSchema,
        metrics: z.array(ScalarMetricSchema).min(1),
        fromStep: z.number().int().min(0).optional(),
        toStep: z.number().int().min(0).optional(),
        maxPoints: z.number().int().min(2).max(2000).default(2000),
      })
      .strict(),
    result: SeriesSchema,
  },
  'metrics.totals': { params: byRun, result: RunTotalsSchema },
  'datasets.preview': {
    params: z
      .object({
        dataset: DatasetSpecSchema,
        records: z.number().int().min(1).max(50).default(3),
        seqLen: z.number().int().min(1).optional().describe('train.seq_len: records longer are flagged'),
      })
      .strict(),
    result: DataPreviewSchema,
  },
  'runs.servingHints': { params: ServingHintsParamsSchema, result: ServingHintsSchema },
  'checkpoints.exportServingHints': {
    params: ServingHintsParamsSchema.extend({ dir: AbsolutePathSchema }).strict(),
    result: z.object({ dir: z.string(), files: z.array(z.string()), hints: ServingHintsSchema }),
  },
  'metrics.expertLoad': {
    params: LayerStepRange.extend({ maxSteps: z.number().int().min(1).max(2000).default(2000) }).strict(),
    result: ExpertLoadSchema,
  },
  'metrics.stepLoads': {
    params: z.object({ id: RunIdSchema, step: z.number().int().min(1) }).strict(),
    result: StepLoadsSchema,
  },
  'metrics.placement': {
    params: LayerStepRange.extend({ maxPoints: z.number().int().min(2).max(2000).default(2000) })
      .strict()
      .describe('one MoE layer’s placement over a step range; one step’s loads per device are in metrics.stepLoads'),
    result: PlacementSeriesSchema,
  },
  'checkpoints.export': {
    params: z
      .object({
        id: RunIdSchema,
        step: z.number().int().min(0).optional().describe('default: the latest checkpoint'),
        dir: AbsolutePathSchema,
        modelType: z.enum(HF_MODEL_TYPE_NAMES).default('mixtral'),
        dtype: z.enum(['f32', 'bf16']).default('f32'),
        expertLayout: z.enum(HF_EXPERT_LAYOUTS).optional()
          .describe('per-expert or fused (3-D) expert tensors; default: the model type’s usual layout'),
        format: z.enum(EXPORT_FORMATS).default('merged')
          .describe('merged: the whole model (a LoRA run’s adapters merged into their weights); adapter: a LoRA run’s PEFT adapter (adapter_config.json + adapter_model.safetensors, f32)'),
      })
      .strict(),
    result: z.object({ dir: z.string() }),
  },
  'finetune.measureExperts': {
    params: z
      .object({
        config: RunConfigSchema.describe('the model and train sections are used (batch shape, seq_len)'),
        dataset: DatasetSpecSchema,
        init: AbsolutePathSchema.optional().describe('the frozen base: this checkpoint’s weights; default: the config’s seeded init'),
        batches: z.number().int().min(1).max(1 << 20).optional().describe('default: finetune.esft.sample_batches, else 32'),
        threshold: z.number().gt(0).max(1).optional().describe('default: finetune.esft.threshold, else 0.9'),
        score: z.enum(['gate', 'tokens']).optional().describe('default: finetune.esft.score, else gate'),
      })
      .strict(),
    result: ExpertSharesSchema,
  },
  'models.inspect': {
    params: z.object({ dir: AbsolutePathSchema.describe('a Hugging Face model folder') }).strict(),
    result: ModelCardSchema.describe('read from config.json and the safetensors headers; no weight is loaded'),
  },
  'models.export': {
    params: z
      .object({
        dir: AbsolutePathSchema.describe('a Hugging Face model folder, or a PEFT adapter folder (merged into its base)'),
        base: AbsolutePathSchema.optional()
          .describe('the base model folder of a PEFT adapter folder; default: the one its adapter_config.json names (base_model_name_or_path)'),
        to: AbsolutePathSchema.describe('the new folder; never an existing non-empty one'),
        modelType: z.enum(HF_MODEL_TYPE_NAMES).optional().describe('default: the folder’s own model_type'),
        dtype: z.enum(['f32', 'bf16']).default('f32'),
        expertLayout: z.enum(HF_EXPERT_LAYOUTS).optional()
          .describe('per-expert or fused (3-D) expert tensors; default: the model type’s usual layout'),
      })
      .strict()
      .describe('the folder written again as the engine reads it (another dtype, expert layout or model type; MXFP4 and FP8 weights decoded; a PEFT adapter merged into its base); its routed experts pass through an SSD-tier file beside the new folder, so a model larger than memory converts'),
    result: z.object({ dir: z.string() }),
  },
  'presets.list': { params: noParams, result: z.array(PresetSchema) },
  'hardware.probe': { params: noParams, result: HardwareSchema },
  'planner.plan': {
    params: z
      .object({
        config: RunConfigSchema,
        deviceBudgetBytes: z.number().positive().optional().describe('default: what the machine has'),
        hostBudgetBytes: z.number().positive().optional(),
        frozenBf16: z.boolean().optional().describe('count the frozen base as bf16 (only with train.compute_dtype bf16)'),
      })
      .strict(),
    result: PlanSchema,
  },
  'files.list': {
    params: z.object({ dir: AbsolutePathSchema.optional().describe('default: the home directory') }).strict(),
    result: z.object({ dir: z.string(), parent: z.string().nullable(), entries: z.array(FileEntrySchema) }),
  },
  'config.validate': {
    params: z.object({ config: z.unknown() }).strict(),
    result: z.object({ ok: z.boolean(), issues: z.array(ValidationIssueSchema) }),
  },
  'chat.start': {
    params: z
      .object({
        model: ChatModelSchema,
        messages: z.array(ChatMessageSchema).min(1),
        sampling: ChatSamplingSchema.default({ temperature: 0, topK: 0, topP: 1, seed: 0, maxTokens: 128 }),
        experts: ChatExpertHomeSchema.default('resident').describe('where routed experts stay while generating: resident, or the host or SSD tier behind a cache of device slots'),
        precision: ChatPrecisionSchema.default('fp32'),
        tokenizer: AbsolutePathSchema.optional().describe('a tokenizer.json; default: the model folder’s, or the run’s'),
      })
      .strict()
      .describe('starts generating; the tokens arrive as chat.token events and the end as one chat.done'),
    result: ChatStartedSchema,
  },
  'chat.cancel': { params: z.object({ id: z.string() }).strict(), result: ok },
} as const

// Event name -> payload schema (pushed from main to every renderer).
export const events = {
  'run.status': RunSummarySchema,
  'run.step': z.object({
    id: RunIdSchema,
    metrics: StepMetricsSchema,
    expertTokens: z.array(z.array(z.number())).describe('[MoE layer][expert] tokens of this step'),
  }),
  'run.event': RunEventSchema,
  'chat.token': ChatTokenEventSchema,
  'chat.done': ChatDoneEventSchema,
} as const

export type RequestName = keyof typeof requests
export type EventName = keyof typeof events
export type Params<N extends RequestName> = z.input<(typeof requests)[N]['params']>
export type ParsedParams<N extends RequestName> = z.output<(typeof requests)[N]['params']>
export type Result<N extends RequestName> = z.output<(typeof requests)[N]['result']>
export type EventPayload<E extends EventName> = z.output<(typeof events)[E]>

export type RunSpec = z.output<typeof RunSpecSchema>
export type RunSummary = z.output<typeof RunSummarySchema>
export type RunStatus = z.output<typeof RunStatusSchema>
export type RunEvent = z.output<typeof RunEventSchema>
export type Checkpoint = z.output<typeof CheckpointSchema>
export type StepMetrics = z.output<typeof StepMetricsSchema>
export type StepLoads = z.output<typeof StepLoadsSchema>
export type DevicePlacement = z.output<typeof DevicePlacementSchema>
export type PlacementSeries = z.output<typeof PlacementSeriesSchema>
export type Hardware = z.output<typeof HardwareSchema>
export type Plan = z.output<typeof PlanSchema>
export type ResolvedOffload = z.output<typeof ResolvedOffloadSchema>
export type FileEntry = z.output<typeof FileEntrySchema>
export type ChatMessage = z.output<typeof ChatMessageSchema>
export type ChatSampling = z.output<typeof ChatSamplingSchema>
export type ChatModel = z.output<typeof ChatModelSchema>
export type ChatStarted = z.output<typeof ChatStartedSchema>
export type ChatTokenEvent = z.output<typeof ChatTokenEventSchema>
export type ChatDoneEvent = z.output<typeof ChatDoneEventSchema>

// Channel names derive from the contract keys, never retyped.
export const requestChannel = (name: RequestName) => `api:${name}` as const
export const eventChannel = (name: EventName) => `event:${name}` as const
export const requestNames = Object.keys(requests) as RequestName[]
export const eventNames = Object.keys(events) as EventName[]

// A contract violation at the boundary, with the failing field's path.
export class ApiInputError extends Error {
  constructor(
    readonly method: string,
    readonly issues: { path: string; message: string }[],
  ) {
    super(`${method}: ${issues.map((i) => `${i.path || '(params)'}: ${i.message}`).join('; ')}`)
  }
}

export function issuesOf(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }))
}

export function parseParams<N extends RequestName>(name: N, raw: unknown): ParsedParams<N> {
  if (!Object.hasOwn(requests, name)) throw new ApiInputError(String(name), [{ path: '', message: 'unknown request' }])
  const spec = requests[name]
  const r = spec.params.safeParse(raw ?? {})
  if (!r.success) throw new ApiInputError(name, issuesOf(r.error))
  return r.data as ParsedParams<N>
}

// The host implements this; transports only route and validate.
export type ApiHandlers = { [N in RequestName]: (params: ParsedParams<N>) => Promise<Result<N>> }
export type EventSink = <E extends EventName>(name: E, payload: EventPayload<E>) => void
