// Imbalance ratio (max / mean tokens per expert) of one layer over the run, with the spike threshold
// and the spikes' peaks. The current step is drawn over it by the view.
import type { EChartsOption } from 'echarts'

import type { ReplayPalette } from './replay-palette'

export interface ImbalanceInput {
  steps: ArrayLike<number>
  ratios: ArrayLike<number>
  threshold: number
  spikeSteps: readonly { step: number; ratio: number }[]
  /** The ratios come from bucket means (a first look before the full-resolution ones arrive). */
  approximate: boolean
}

export const IMBALANCE_GRID = { left: 44, right: 12, top: 22, bottom: 24 } as const

// At most this many spike markers: more would cover the line.
const MAX_SPIKE_MARKS = 200

/** What every max/mean chart of Replay shares: the grid the view's step marker assumes, steps along x, ratios from 1 up. */
export function ratioChartFrame(title: string, palette: ReplayPalette): EChartsOption {
  return {
    animation: false,
    grid: { ...IMBALANCE_GRID },
    tooltip: { trigger: 'axis', valueFormatter: (v) => (typeof v === 'number' ? v.toFixed(2) : '—') },
    title: { text: title, left: 44, top: 0, textStyle: { color: palette.muted, fontSize: 12, fontWeight: 'normal' } },
    xAxis: {
      type: 'value',
      min: 'dataMin',
      max: 'dataMax',
      axisLabel: { color: palette.muted },
      axisLine: { lineStyle: { color: palette.grid } },
      splitLine: { show: false },
    },
    yAxis: {
      type: 'value',
      min: 1,
      scale: true,
      axisLabel: { color: palette.muted },
      splitLine: { lineStyle: { color: palette.grid } },
    },
  }
}

export function replayImbalanceOption(input: ImbalanceInput, palette: ReplayPalette): EChartsOption {
  const points: [number, number | null][] = new Array(input.ratios.length)
  for (let i = 0; i < input.ratios.length; i++) {
    const r = input.ratios[i]!
    points[i] = [input.steps[i]!, Number.isFinite(r) ? r : null]
  }
  const marks = input.spikeSteps.length <= MAX_SPIKE_MARKS ? input.spikeSteps : []
  return {
    ...ratioChartFrame(input.approximate ? 'imbalance (max/mean) · from bucket means, refining…' : 'imbalance (max/mean)', palette),
    series: [
      {
        id: 'ratio',
        type: 'line',
        data: points,
        showSymbol: false,
        sampling: 'lttb',
        lineStyle: { width: 1, color: palette.accent },
        connectNulls: false,
        markLine: {
          silent: true,
          symbol: 'none',
          label: { formatter: `threshold ${input.threshold.toFixed(2)}`, color: palette.warn, position: 'insideEndTop' },
          lineStyle: { color: palette.warn, type: 'dashed' },
          data: Number.isFinite(input.threshold) ? [{ yAxis: input.threshold }] : [],
        },
      },
      {
        id: 'spikes',
        type: 'scatter',
        data: marks.map((s) => [s.step, s.ratio]),
        symbolSize: 5,
        itemStyle: { color: palette.bad },
        silent: true,
      },
    ],
  }
}
