// A Hugging Face model folder as the workbench shows it before anything is loaded: what it is, what it weighs,
// what is on disk and whether the engine can take it as it is (models.inspect).
import { z } from 'zod'

import { ModelConfigSchema } from './config'

export const ModelCardSchema = z.object({
  dir: z.string(),
  modelType: z.string().describe('config.json model_type'),
  label: z.string().nullable().describe('the model type for people (Qwen3-MoE); null: a type the engine does not know'),
  architecture: z.string().nullable(),
  supported: z.boolean().describe('the engine can import the folder as it is'),
  problems: z.array(z.string()).describe('what stops the import, each naming its file, tensor or field'),
  notes: z.array(z.string()).describe('what the import does beyond reading float tensors (FP8 dequantised, MTP skipped)'),
  model: ModelConfigSchema.nullable().describe('the engine model config converted from config.json; null when refused'),
  shape: z
    .object({
      layers: z.number().int(),
      moeLayers: z.number().int(),
      expertsPerLayer: z.number().int().describe('routed experts of each MoE layer (the first one where they vary)'),
      topK: z.number().int(),
      sharedExpert: z.boolean(),
      totalParams: z.number(),
      activeParams: z.number().describe('per token: the dense part and top_k experts of each MoE layer'),
    })
    .nullable(),
  weights: z.object({
    format: z.enum(['single', 'sharded', 'none']),
    complete: z.boolean().describe('every shard the index names is present'),
    shards: z.array(z.object({ file: z.string(), present: z.boolean(), tensors: z.number().int().optional() })),
    dtypes: z.record(z.string(), z.number().int()).describe('stored tensors per safetensors dtype, from the headers'),
    bytes: z.number().nullable(),
    tensors: z.number().int().nullable(),
    expectedTensors: z.number().int().nullable(),
    expertLayout: z.string().nullable(),
  }),
  tokenizer: z.object({
    tokenizerJson: z.boolean(),
    tokenizerConfig: z.boolean(),
    chatTemplate: z.enum(['chat_template.jinja', 'tokenizer_config.json']).nullable()
      .describe('where the chat template was found; null: none'),
  }),
  adapter: z
    .object({
      base: z.string().describe('the base model folder the rest of the card describes'),
      rank: z.number().int(),
      alpha: z.number(),
      modules: z.number().int().describe('the Linear modules it adapts'),
    })
    .optional()
    .describe('the folder is a PEFT LoRA adapter: it answers and merges on this base; absent: a model folder'),
})
export type ModelCard = z.infer<typeof ModelCardSchema>
