// The pre-flight memory bar: each tier's bytes split by kind, scaled against the larger of its total
// and its budget, so "over budget" reads as a bar crossing the budget mark.
import type { Plan } from '../../main/api/contract'

export const BYTE_KINDS = ['params', 'grads', 'optimizer', 'activations', 'buffers'] as const
export type ByteKind = (typeof BYTE_KINDS)[number]

export interface TierBar {
  tier: Plan['tiers'][number]['tier']
  total: number
  budget: number | null
  overBudget: boolean
  /** Percent of the bar's width per kind. */
  segments: { kind: ByteKind; bytes: number; percent: number }[]
  /** Where the budget mark sits, in percent; null without a budget. */
  budgetPercent: number | null
}

export function tierBars(plan: Plan): TierBar[] {
  return plan.tiers.map((tier) => {
    const scale = Math.max(tier.total, tier.budget ?? 0)
    const percent = (bytes: number) => (scale > 0 ? (100 * bytes) / scale : 0)
    return {
      tier: tier.tier,
      total: tier.total,
      budget: tier.budget,
      overBudget: tier.budget !== null && tier.total > tier.budget,
      segments: BYTE_KINDS.map((kind) => ({ kind, bytes: tier[kind], percent: percent(tier[kind]) })),
      budgetPercent: tier.budget !== null && scale > 0 ? percent(tier.budget) : null,
    }
  })
}

export const MODE_TEXT: Record<Plan['mode'], string> = {
  none: 'resident (no offload)',
  host: 'experts offloaded to host memory',
  ssd: 'experts offloaded to SSD behind a host cache',
}
