// Expert load as a heatmap: one column per step (the latest ones), one row per expert, colour =
// tokens routed to that expert in that step.
import type { EChartsOption } from 'echarts'

import type { ExpertLoad } from './series'

export interface HeatmapCells {
  steps: number[]
  experts: string[]
  cells: [number, number, number][] // [column, expert, tokens]
  max: number
}

export function heatmapCells(load: ExpertLoad, latestColumns: number): HeatmapCells {
  const first = Math.max(0, load.steps.length - latestColumns)
  const steps = load.steps.slice(first)
  const cells: [number, number, number][] = []
  let max = 0
  steps.forEach((_, column) => {
    const row = first + column
    for (let e = 0; e < load.experts; e++) {
      const tokens = load.counts[row * load.experts + e] ?? 0
      max = Math.max(max, tokens)
      cells.push([column, e, tokens])
    }
  })
  return { steps, experts: Array.from({ length: load.experts }, (_, e) => `E${e}`), cells, max }
}

export function expertHeatmapOption(load: ExpertLoad, latestColumns = 100): EChartsOption {
  const { steps, experts, cells, max } = heatmapCells(load, latestColumns)
  return {
    grid: { left: 44, right: 72, top: 12, bottom: 40 },
    tooltip: {
      position: 'top',
      formatter: (p) => {
        const [column, expert, tokens] = (Array.isArray(p) ? p[0] : p)?.value as [number, number, number]
        return `step ${steps[column]} · ${experts[expert]}: ${Math.round(tokens).toLocaleString()} tokens`
      },
    },
    xAxis: { type: 'category', data: steps.map(String), name: 'step', nameLocation: 'middle', nameGap: 24, splitArea: { show: false } },
    yAxis: { type: 'category', data: experts, inverse: true },
    visualMap: {
      min: 0,
      max: Math.max(1, max),
      calculable: true,
      orient: 'vertical',
      right: 0,
      top: 'middle',
      itemHeight: 140,
      itemWidth: 10,
      formatter: (v: unknown) => String(Math.round(Number(v))),
    },
    series: [{ name: 'tokens', type: 'heatmap', data: cells, progressive: 0, emphasis: { itemStyle: { borderWidth: 1 } } }],
  }
}
