// Compare's memory-vs-time scatter: one point per run, peak device bytes against wall time. Until
// the engine records offload telemetry, the device bytes are the planner's total for the run's
// config, and the subtitle says so.
import type { EChartsOption, ScatterSeriesOption } from 'echarts'

import { runColor } from './compare-overlay'
import { byteUnit } from './series'

export interface MemoryPoint {
  id: string
  name: string
  wallMs: number | null
  deviceBytes: number | null
  /** Whether deviceBytes was measured (telemetry) rather than planned. */
  measured: boolean
}

export const PLANNED_SUBTITLE = 'Device bytes are the planner’s estimate for each run’s config until offload telemetry is recorded'

export function memoryScatterOption(points: readonly MemoryPoint[]): EChartsOption {
  const unit = byteUnit(Math.max(0, ...points.map((p) => p.deviceBytes ?? 0)))
  const series: ScatterSeriesOption[] = points.flatMap((p, index) =>
    p.wallMs === null || p.deviceBytes === null
      ? []
      : [
          {
            id: p.id,
            name: p.name,
            type: 'scatter',
            symbolSize: 12,
            itemStyle: { color: runColor(index) },
            label: { show: true, position: 'right', formatter: p.name, color: 'inherit' },
            data: [[p.wallMs / 1000, p.deviceBytes / unit.bytes]],
          },
        ],
  )
  return {
    animation: false,
    title: {
      // The card around the chart carries the title; the chart says where its numbers come from.
      text: '',
      subtext: points.every((p) => p.measured) ? 'Measured peaks' : PLANNED_SUBTITLE,
      left: 0,
      top: 0,
      textStyle: { fontSize: 13 },
      subtextStyle: { fontSize: 11 },
    },
    grid: { left: 64, right: 120, top: 64, bottom: 48 },
    tooltip: { trigger: 'item', valueFormatter: (v) => (typeof v === 'number' ? v.toFixed(3) : String(v)) },
    xAxis: { type: 'value', name: 'wall time (s)', nameLocation: 'middle', nameGap: 28, min: 0 },
    yAxis: { type: 'value', name: `device ${unit.name}`, min: 0 },
    series,
  }
}
