// The one typed contract between renderer, preload and main: every request with its params and
// result, and every pushed event. Both transports (Electron IPC and the browser-mode WebSocket)
// derive their channel names from these keys and validate every input against these schemas.
import { z } from 'zod'

import {
  ChatDoneEventSchema,
  ChatExpertHomeSchema,
  ChatMessageSchema,
  ChatModelSchema,
  ChatPrecisionSchema,
  ChatSamplingSchema,
  ChatStartedSchema,
  ChatTokenEventSchema,
} from './chat'
import { RunConfigSchema } from './config'
import { HardwareSchema, PlanSchema, ResolvedOffloadSchema } from './hardware'
import {
  DevicePlacementSchema,
  ExpertLoadSchema,
  PlacementSeriesSchema,
  RunTotalsSchema,
  ScalarMetricSchema,
  SeriesSchema,
  ServingHintsParamsSchema,
  ServingHintsSchema,
  StepLoadsSchema,
  StepMetricsSchema,
} from './metrics'
import { ModelCardSchema } from './model-card'
import { HF_EXPERT_LAYOUTS, HF_MODEL_TYPE_NAMES } from './model-families'
import {
  AbsolutePathSchema,
  CheckpointSchema,
  DataPreviewSchema,
  DatasetSpecSchema,
  EXPORT_FORMATS,
  ExpertSharesSchema,
  PresetSchema,
  RunDetailSchema,
  RunEventSchema,
  RunIdSchema,
  RunSpecSchema,
  RunStatusSchema,
  RunSummarySchema,
} from './runs'

// The schemas it is made of, one file a concern (runs and datasets, hardware and the plan, telemetry, Try it),
// exported from here too, so that importers need only the contract.
export * from './chat'
export * from './hardware'
export * from './metrics'
export * from './runs'

export const FileEntrySchema = z.object({ name: z.string(), kind: z.enum(['file', 'dir']), bytes: z.number() })

export const ValidationIssueSchema = z.object({ path: z.string(), message: z.string() })

const noParams = z.object({}).strict()
const byRun = z.object({ id: RunIdSchema }).strict()
const ok = z.object({ ok: z.literal(true) })

// Request name -> params schema and result schema.
/** One MoE layer of a run over an optional step range: what the per-layer metrics requests take. */
const LayerStepRange = z.object({
  id: RunIdSchema,
  layer: z.number().int().min(0),
  fromStep: z.number().int().min(0).optional(),
  toStep: z.number().int().min(0).optional(),
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
