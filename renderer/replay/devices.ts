// One MoE layer at the replayed step: tokens per device before placement (the static home, expert e on
// device e mod D) and after it, as the engine recorded them (a split expert counts where each piece ran,
// so "after" cannot be summed from the expert->device map), and what each expert's state was.
import type { DevicePlacement, StepLoads } from '../../main/api/contract'

export type LayerStep = StepLoads['layers'][number]

export interface DeviceLoads {
  devices: number
  before: number[]
  after: number[]
  imbalanceBefore: number
  imbalanceAfter: number
  spilledTokens: number
  movedExperts: number
}

/** The recorded loads per device, or null when the step placed nothing (one device). */
export function deviceLoads(layer: Pick<LayerStep, 'devices'>): DeviceLoads | null {
  const d: DevicePlacement | null = layer.devices
  if (!d) return null
  return {
    devices: d.loadBefore.length,
    before: d.loadBefore,
    after: d.loadAfter,
    imbalanceBefore: d.imbalanceBefore,
    imbalanceAfter: d.imbalanceAfter,
    spilledTokens: d.spilledTokens,
    movedExperts: d.movedExperts,
  }
}

/** "max/mean 1.95 → 1.22 · 120 tokens spilled · 3 weight copies" */
export function placementSummary(loads: DeviceLoads): string {
  const copies = `${loads.movedExperts.toLocaleString()} weight ${loads.movedExperts === 1 ? 'copy' : 'copies'}`
  return `max/mean ${loads.imbalanceBefore.toFixed(2)} → ${loads.imbalanceAfter.toFixed(2)} · ${loads.spilledTokens.toLocaleString()} tokens spilled · ${copies}`
}

export const TIER_NAMES = ['device', 'host', 'SSD'] as const

export interface ExpertState {
  expert: number
  tokens: number
  /** Device of the expert's first rows; null when it had no rows or the run places nothing. */
  device: number | null
  tier: (typeof TIER_NAMES)[number] | null
  pinned: boolean | null
  spilled: number | null
  /** The router's selection bias after the step; null when the model has none. */
  bias: number | null
}

export function expertStates(layer: Omit<LayerStep, 'devices'>): ExpertState[] {
  return layer.tokens.map((tokens, expert) => {
    const tier = layer.tiers?.[expert]
    const device = layer.placement?.[expert]
    return {
      expert,
      tokens,
      device: device === undefined || device < 0 ? null : device,
      tier: tier === undefined ? null : (TIER_NAMES[tier] ?? null),
      pinned: layer.pins ? layer.pins[expert] === 1 : null,
      spilled: layer.spilled ? (layer.spilled[expert] ?? 0) : null,
      bias: layer.selectionBias?.[expert] ?? null,
    }
  })
}
