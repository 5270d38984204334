// Max/mean tokens per device of one layer over the run: before placement (every expert on its static
// home e mod D) and after the policy, with least-loaded's lambda, the ratio above which it rebalances.
// Framed as the expert-imbalance chart, so the view's step marker lines up the same way.
import type { EChartsOption } from 'echarts'

import type { PlacementSeries } from '../../main/api/contract'
import { ratioChartFrame } from './replay-imbalance'
import type { ReplayPalette } from './replay-palette'

export interface PlacementImbalanceInput {
  series: Pick<PlacementSeries, 'steps' | 'imbalanceBefore' | 'imbalanceAfter'>
  /** least-loaded's threshold; null for the policies that always place. */
  lambda: number | null
}

const points = (steps: readonly number[], values: readonly number[]): [number, number][] => steps.map((step, i) => [step, values[i]!])

export function placementImbalanceOption(input: PlacementImbalanceInput, palette: ReplayPalette): EChartsOption {
  const { steps, imbalanceBefore, imbalanceAfter } = input.series
  const line = (id: string, name: string, color: string, values: readonly number[]) => ({
    id, name, type: 'line' as const, data: points(steps, values), showSymbol: steps.length === 1, sampling: 'lttb' as const,
    lineStyle: { width: 1, color }, itemStyle: { color },
  })
  return {
    ...ratioChartFrame('device imbalance (max/mean tokens per device)', palette),
    legend: { right: 12, top: 0, textStyle: { color: palette.muted }, itemWidth: 12, itemHeight: 8 },
    series: [
      line('before', 'before (e mod D)', palette.warn, imbalanceBefore),
      {
        ...line('after', 'after placement', palette.accent, imbalanceAfter),
        markLine: {
          silent: true,
          symbol: 'none',
          label: { formatter: `λ ${input.lambda ?? ''}: rebalance above`, color: palette.muted, position: 'insideEndTop' },
          lineStyle: { color: palette.muted, type: 'dashed' },
          data: input.lambda !== null ? [{ yAxis: input.lambda }] : [],
        },
      },
    ],
  }
}
