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

/** The device always; host and SSD when the plan puts bytes there. */
export function tierBars(plan: Plan): TierBar[] {
  return plan.tiers.filter((tier) => tier.tier === 'device' || tier.total > 0).map((tier) => {
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

const MODE_TEXT: Record<Plan['mode'], string> = {
  none: 'resident (no offload)',
  host: 'experts offloaded to host memory',
  ssd: 'experts offloaded to SSD behind a host cache',
}

/** "auto → host: experts offloaded to host memory", or the mode alone when it was asked for. */
export function modeLine(plan: Pick<Plan, 'requested' | 'mode'>): string {
  return `${plan.requested === 'auto' ? `auto → ${plan.mode}` : plan.mode}: ${MODE_TEXT[plan.mode]}`
}

/** Slots and cache entries the plan gives the offloaded experts; empty when resident. */
export function capacityLines(plan: Pick<Plan, 'slots' | 'cacheExperts'>): string[] {
  const lines: string[] = []
  if (plan.slots !== null) lines.push(`${plan.slots} expert slot${plan.slots === 1 ? '' : 's'} on the device`)
  if (plan.cacheExperts !== null) lines.push(`${plan.cacheExperts} host cache entr${plan.cacheExperts === 1 ? 'y' : 'ies'}`)
  return lines
}
