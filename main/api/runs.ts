// Runs and their datasets as the contract carries them: what a new run is made of, what a stored run reports,
// its events and checkpoints, the presets a run starts from, and a dataset's preview.
import { z } from 'zod'

import { RunConfigSchema } from './config'
import { ResolvedOffloadSchema } from './hardware'

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

export const PresetSchema = z.object({ name: z.string(), description: z.string(), config: RunConfigSchema })

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
