// The machine and what fits on it: the hardware probe, the offload the host decides for a run, and the planner's
// memory plan per tier (hardware.probe, planner.plan).
import { z } from 'zod'

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
