// The run config's `finetune` section: which parameter groups train (full fine-tuning, LoRA, expert-specialised
// fine-tuning). Absent or null: every parameter trains, exactly as before the section existed. Defaults that do not
// depend on the method are zod defaults; those that do (train, lora.targets, esft) are filled by resolveFinetune,
// the same rule the engine applies when it reads the section.
import { z } from 'zod'

/** Parameter groups, in the engine's order. */
export const FINETUNE_GROUPS = ['embeddings', 'attention', 'norms', 'router', 'experts', 'shared_experts', 'dense_mlp', 'lm_head'] as const
export type FinetuneGroup = (typeof FINETUNE_GROUPS)[number]
/** Modules LoRA adapts. */
export const LORA_TARGETS = ['attention', 'experts', 'shared_experts', 'dense_mlp'] as const
export type LoraTarget = (typeof LORA_TARGETS)[number]
export const FINETUNE_METHODS = ['full', 'lora', 'esft'] as const
export type FinetuneMethod = (typeof FINETUNE_METHODS)[number]

// A list of distinct names from `valid`; an unknown one is refused listing the valid ones.
function nameList<T extends string>(valid: readonly T[], what: string) {
  return z
    .array(z.enum(valid as unknown as [T, ...T[]], { error: `unknown ${what}; valid: ${valid.join(', ')}` }))
    .superRefine((names, ctx) => {
      names.forEach((n, i) => {
        if (names.indexOf(n) !== i) ctx.addIssue({ code: 'custom', path: [i], message: `"${n}" is listed twice` })
      })
    })
}

export const LoraConfigSchema = z
  .object({
    rank: z.number().int('must be a whole number').min(1, 'must be at least 1').max(65536).default(16)
      .describe('Rank r of each adapter (A is r × in, B is out × r)'),
    alpha: z.number().gt(0, 'must be greater than 0').default(32).describe('Scaling numerator: the update is (alpha / r) · B·A'),
    dropout: z.number().min(0, 'must be in [0, 1)').lt(1, 'must be in [0, 1)').default(0).describe('Dropout on the adapter input'),
    rslora: z.boolean().default(false).describe('Rank-stabilised scaling alpha / √r instead of alpha / r'),
    targets: nameList(LORA_TARGETS, 'LoRA target').optional()
      .describe('Modules that get adapters; default ["attention", "experts"] (ESFT with LoRA: ["experts"])'),
  })
  .strict()

export const EsftConfigSchema = z
  .object({
    threshold: z.number().gt(0, 'must be in (0, 1]').max(1, 'must be in (0, 1]').default(0.9)
      .describe('Per layer, the smallest set of experts whose cumulative share reaches this'),
    score: z.enum(['gate', 'tokens']).default('gate').describe("Each expert's share of the gate scores (ESFT-Gate) or of the routed tokens (ESFT-Token)"),
    sample_batches: z.number().int('must be a whole number').min(1, 'must be at least 1').max(1 << 20).default(32)
      .describe('Training batches the frozen model is run over to measure the shares'),
    with: z.enum(['full', 'lora']).default('full').describe('Train the chosen experts fully or with LoRA adapters'),
  })
  .strict()

export const FinetuneConfigSchema = z
  .object({
    method: z.enum(FINETUNE_METHODS).describe('full: every chosen group trains; lora: adapters on a frozen base; esft: the measured experts'),
    train: nameList(FINETUNE_GROUPS, 'parameter group').optional()
      .describe('Groups whose base weights train; default: every group (full), none (lora), ["experts"] (esft with full)'),
    experts: z.record(z.string().regex(/^\d+$/, 'keys are model layer indexes'), z.array(z.number().int().min(0)))
      .nullable().default(null)
      .describe('Per MoE layer (model layer index), the routed experts the method touches; a layer not listed: all of them'),
    lora: LoraConfigSchema.optional(),
    esft: EsftConfigSchema.optional(),
  })
  .strict()
  .superRefine((f, ctx) => {
    if (usesLora(f) && !f.lora)
      ctx.addIssue({ code: 'custom', path: ['lora'], message: `required when the method is ${f.method === 'lora' ? 'lora' : 'esft with "with": "lora"'}` })
    if (f.method !== 'esft' && f.esft) ctx.addIssue({ code: 'custom', path: ['esft'], message: 'only for the esft method' })
    if (!usesLora(f) && f.lora) ctx.addIssue({ code: 'custom', path: ['lora'], message: 'only when the method uses LoRA (lora, or esft with "with": "lora")' })
  })

export type FinetuneConfig = z.infer<typeof FinetuneConfigSchema>
export type LoraConfig = z.infer<typeof LoraConfigSchema>
export type EsftConfig = z.infer<typeof EsftConfigSchema>

const ESFT_DEFAULTS: EsftConfig = { threshold: 0.9, score: 'gate', sample_batches: 32, with: 'full' }

/** Whether the method puts LoRA adapters on the model. */
export function usesLora(f: Pick<FinetuneConfig, 'method' | 'esft'>): boolean {
  return f.method === 'lora' || (f.method === 'esft' && (f.esft?.with ?? 'full') === 'lora')
}

/** The section with every per-method default filled in (null: no section, full training of everything). */
export interface ResolvedFinetune {
  method: FinetuneMethod
  train: FinetuneGroup[]
  experts: Record<string, number[]> | null
  lora: (Omit<LoraConfig, 'targets'> & { targets: LoraTarget[] }) | null
  esft: EsftConfig | null
}

export function resolveFinetune(f: FinetuneConfig | null | undefined): ResolvedFinetune | null {
  if (!f) return null
  const esft = f.method === 'esft' ? { ...ESFT_DEFAULTS, ...f.esft } : null
  const lora = usesLora(f) && f.lora
    ? { ...f.lora, targets: f.lora.targets ?? (f.method === 'esft' ? ['experts' as const] : ['attention' as const, 'experts' as const]) }
    : null
  const train: FinetuneGroup[] = f.train
    ?? (f.method === 'full' ? [...FINETUNE_GROUPS] : f.method === 'esft' && esft?.with === 'full' ? ['experts'] : [])
  return { method: f.method, train, experts: f.experts ?? null, lora, esft }
}

/** The routed experts of model layer `layer` (of `experts` in all) that the method touches. */
export function touchedExperts(f: ResolvedFinetune, layer: number, experts: number): number[] {
  const listed = f.experts?.[String(layer)]
  return listed ?? Array.from({ length: experts }, (_, e) => e)
}
