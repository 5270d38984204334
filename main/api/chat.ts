// The chat ("Try it") schemas: what chat.start takes and answers, and the chat.token and chat.done events it
// streams.
import { z } from 'zod'

import { AbsolutePathSchema, RunIdSchema } from './runs'

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
