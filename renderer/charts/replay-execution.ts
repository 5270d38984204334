// How the layer ran on the devices at the current step: each device's busy time as a bar in that device's
// colour, with the measured critical time and equation 10's prediction as lines across them; and each
// device's peak bytes with the per-device budget as a line, on ticks of whole binary units. Updated every step
// with series data and the value axis only (merge mode, by series id); the whole option is rebuilt only when the
// device count changes.
import type { EChartsOption } from 'echarts'

import { formatBytes } from '../format'
import type { DevicePeaks, LayerExecutionView } from '../replay/execution'
import { deviceLabels } from './replay-devices'
import { deviceColor, type ReplayPalette } from './replay-palette'

const byDevice = (values: readonly number[]) => values.map((value, d) => ({ value, itemStyle: { color: deviceColor(d, values.length) } }))

// A horizontal line across the bars; none when there is no value to mark.
const markLine = (lines: { name: string; value: number | null; color: string; dashed: boolean }[]) => ({
  silent: true,
  symbol: 'none',
  data: lines
    .flatMap((l) => (l.value === null ? [] : [{ ...l, value: l.value }]))
    .map((l) => ({
      name: l.name,
      yAxis: l.value,
      lineStyle: { color: l.color, type: l.dashed ? ('dashed' as const) : ('solid' as const) },
      label: { formatter: l.name, position: 'insideEndTop' as const, color: l.color },
    })),
})

const busyLines = (x: LayerExecutionView, palette: ReplayPalette) =>
  markLine([
    { name: 'critical (measured)', value: x.criticalMs, color: palette.accent, dashed: false },
    { name: 'predicted (eq. 10)', value: x.predictedMs, color: palette.warn, dashed: true },
  ])

/** The smallest 1, 2, 2.5 or 5 × 10^k at or above v (v > 0). */
export function niceCeil(v: number): number {
  const power = 10 ** Math.floor(Math.log10(v))
  return ([1, 2, 2.5, 5, 10].find((m) => m * power >= v * (1 - 1e-12)) ?? 10) * power
}

// The value axis reaches a marked line above every bar, at a round number (ECharts scales to the bars only);
// undefined: ECharts' own scale. A function, so each merged update replaces the last step's.
const reach = (...lines: (number | null)[]) => {
  const line = Math.max(0, ...lines.filter((v): v is number => v !== null))
  return { max: (extent: { max: number }) => (line > extent.max ? niceCeil(line * 1.05) : undefined) }
}

/** Byte ticks in whole binary units: about 4 steps of 1, 2 or 5 × 10^k KiB (MiB, GiB) up to at least top. */
export function byteTicks(top: number): { max: number; interval: number } {
  if (!(top > 0)) return { max: 1024, interval: 256 }
  const unit = 1024 ** Math.min(4, Math.floor(Math.log(top) / Math.log(1024)))
  const raw = top / unit / 4
  const power = 10 ** Math.floor(Math.log10(raw))
  const step = ([1, 2, 5, 10].find((m) => m * power >= raw) ?? 10) * power * unit
  return { max: Math.ceil(top / step) * step, interval: step }
}

const peakAxis = (p: DevicePeaks) => byteTicks(Math.max(0, ...p.peaks, p.budget ?? 0))

/** The per-step update of the busy chart: the bars, the lines and the axis reaching them, merged by series id. */
export function deviceBusyData(x: LayerExecutionView, palette: ReplayPalette): EChartsOption {
  return { yAxis: reach(x.criticalMs, x.predictedMs), series: [{ id: 'busy', data: byDevice(x.busyMs), markLine: busyLines(x, palette) }] }
}

const frame = (devices: number, yName: string, palette: ReplayPalette, formatter?: (v: number) => string) => ({
  animation: false,
  grid: { left: 64, right: 12, top: 24, bottom: 24 },
  tooltip: { trigger: 'axis' as const, axisPointer: { type: 'shadow' as const }, ...(formatter ? { valueFormatter: (v: unknown) => formatter(Number(v)) } : {}) },
  xAxis: {
    type: 'category' as const,
    data: deviceLabels(devices),
    axisLabel: { color: palette.muted },
    axisLine: { lineStyle: { color: palette.grid } },
  },
  yAxis: {
    type: 'value' as const,
    name: yName,
    nameTextStyle: { color: palette.muted },
    axisLabel: { color: palette.muted, ...(formatter ? { formatter } : {}) },
    splitLine: { lineStyle: { color: palette.grid } },
  },
})

export function deviceBusyOption(x: LayerExecutionView, palette: ReplayPalette): EChartsOption {
  const f = frame(x.devices, 'busy ms', palette)
  return {
    ...f,
    yAxis: { ...f.yAxis, ...reach(x.criticalMs, x.predictedMs) },
    series: [{ id: 'busy', name: 'busy (forward + backward)', type: 'bar', barMaxWidth: 28, data: byDevice(x.busyMs), markLine: busyLines(x, palette) }],
  }
}

const peakLine = (p: DevicePeaks, palette: ReplayPalette) =>
  markLine([{ name: `budget ${p.budget !== null ? formatBytes(p.budget) : ''}`, value: p.budget, color: palette.warn, dashed: true }])

/** The per-step update of the peaks chart. */
export function devicePeaksData(p: DevicePeaks, palette: ReplayPalette): EChartsOption {
  return { yAxis: peakAxis(p), series: [{ id: 'peak', data: byDevice(p.peaks), markLine: peakLine(p, palette) }] }
}

export function devicePeaksOption(p: DevicePeaks, palette: ReplayPalette): EChartsOption {
  const f = frame(p.peaks.length, 'peak bytes', palette, formatBytes)
  return {
    ...f,
    yAxis: { ...f.yAxis, ...peakAxis(p) },
    series: [{ id: 'peak', name: 'peak bytes', type: 'bar', barMaxWidth: 28, data: byDevice(p.peaks), markLine: peakLine(p, palette) }],
  }
}
