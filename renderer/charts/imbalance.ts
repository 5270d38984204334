// Load imbalance per MoE layer: max/mean of tokens per expert (1 = perfectly balanced; E = every
// token went to one of E experts).
import type { EChartsOption } from 'echarts'

import { stepAxes, type ExpertLoad, type Point } from './series'

export function imbalanceRatio(tokens: readonly number[]): number | null {
  if (tokens.length === 0) return null
  let max = 0
  let sum = 0
  for (const t of tokens) {
    max = Math.max(max, t)
    sum += t
  }
  return sum > 0 ? max / (sum / tokens.length) : null
}

/** One ratio per recorded step of a layer's expert load. */
export function imbalanceOverSteps(load: ExpertLoad): Point[] {
  return load.steps.map((step, row) => [step, imbalanceRatio(load.counts.slice(row * load.experts, (row + 1) * load.experts))])
}

export interface LayerImbalance {
  layer: number
  points: Point[]
}

export function imbalanceOption(layers: readonly LayerImbalance[]): EChartsOption {
  return {
    ...stepAxes('max / mean', 1),
    legend: { show: layers.length > 1, top: 0, right: 8, type: 'scroll' },
    series: layers.map(({ layer, points }) => ({ name: `layer ${layer}`, type: 'line' as const, data: points, showSymbol: false })),
  }
}
