// Tokens per device for one layer and step: before placement (the static home, expert e on device
// e mod D) and after (the device the placement put each expert on), with the tokens that spilled away
// from their expert's device shown apart.

export interface LayerStep {
  tokens: readonly number[]
  placement: readonly number[] | null
  tiers: readonly number[] | null
  pins: readonly number[] | null
  spilled: readonly number[] | null
}

export interface DeviceLoads {
  /** null when the run recorded no placement: everything ran on one device. */
  devices: number | null
  before: number[]
  after: number[]
  /** Of `after`, the tokens computed away from that device (spilled to others). */
  spilledAway: number[]
}

export function deviceCount(placement: readonly number[]): number {
  let max = 0
  for (const device of placement) if (device > max) max = device
  return max + 1
}

export function deviceLoads(layer: LayerStep, devicesHint?: number): DeviceLoads {
  const total = layer.tokens.reduce((a, b) => a + b, 0)
  if (!layer.placement) {
    const spilled = layer.spilled?.reduce((a, b) => a + b, 0) ?? 0
    return { devices: null, before: [total], after: [total], spilledAway: [spilled] }
  }
  const devices = Math.max(devicesHint ?? 1, deviceCount(layer.placement))
  const before = new Array<number>(devices).fill(0)
  const after = new Array<number>(devices).fill(0)
  const spilledAway = new Array<number>(devices).fill(0)
  layer.tokens.forEach((tokens, e) => {
    before[e % devices]! += tokens
    const device = layer.placement![e] ?? e % devices
    after[device]! += tokens
    spilledAway[device]! += layer.spilled?.[e] ?? 0
  })
  return { devices, before, after, spilledAway }
}

export const TIER_NAMES = ['device', 'host', 'SSD'] as const

export interface ExpertState {
  expert: number
  tokens: number
  device: number | null
  tier: (typeof TIER_NAMES)[number] | null
  pinned: boolean | null
  spilled: number | null
}

export function expertStates(layer: LayerStep): ExpertState[] {
  return layer.tokens.map((tokens, expert) => {
    const tier = layer.tiers?.[expert]
    return {
      expert,
      tokens,
      device: layer.placement?.[expert] ?? null,
      tier: tier === undefined ? null : (TIER_NAMES[tier] ?? null),
      pinned: layer.pins ? layer.pins[expert] === 1 : null,
      spilled: layer.spilled ? (layer.spilled[expert] ?? 0) : null,
    }
  })
}
