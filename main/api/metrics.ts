// What a run's telemetry is served as: a step's metrics, metric series, expert loads, placement across devices,
// a run's totals and the serving hints drawn from its recorded loads.
import { z } from 'zod'

import { RunIdSchema } from './runs'
import { ALWAYS_FIELD_NAMES, STEP_FIELDS, type AlwaysFieldName, type MeasuredFieldName } from './step-fields'

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
