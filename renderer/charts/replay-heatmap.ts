// The replay heatmap: tokens per expert (rows) over steps or step buckets (columns) of one layer.
// Tens of thousands of cells are too many for ECharts' per-cell shapes (about a second to build), so
// the cells are painted as one columns × experts bitmap, scaled without smoothing over the plot area,
// and ECharts draws only the axes around it. Both are built once per layer and window; the current
// step marker is moved over them by the view.
import type { EChartsOption } from 'echarts'

import type { ReplayPalette } from './replay-palette'

export interface HeatmapInput {
  steps: readonly number[]
  experts: number
  counts: ArrayLike<number>
  /** Steps per column when bucketed (1 = every step). */
  bucketSize: number
  /** What the cells hold (default tokens). A bias heatmap's counts are the bias minus `floor`, scaled to `top`. */
  values?: 'tokens' | 'bias'
  floor?: number
  top?: number
}

/** The plot area inside the chart, in CSS pixels; the bitmap is laid over exactly this rectangle. */
export const HEATMAP_GRID = { left: 44, right: 12, top: 8, bottom: 46 } as const

const LUT_SIZE = 256

function parseHex(color: string): [number, number, number] {
  const hex = color.replace('#', '')
  const full = hex.length === 3 ? [...hex].map((c) => c + c).join('') : hex
  const n = Number.parseInt(full.slice(0, 6), 16)
  return Number.isNaN(n) ? [128, 128, 128] : [(n >> 16) & 255, (n >> 8) & 255, n & 255]
}

/** RGB colours interpolated through the stops: LUT_SIZE entries of 3 bytes. */
export function colorLut(stops: readonly string[]): Uint8Array {
  const rgb = stops.map(parseHex)
  const lut = new Uint8Array(LUT_SIZE * 3)
  for (let i = 0; i < LUT_SIZE; i++) {
    const t = (i / (LUT_SIZE - 1)) * (rgb.length - 1)
    const k = Math.min(rgb.length - 2, Math.floor(t))
    const f = t - k
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(rgb[k]![c]! * (1 - f) + rgb[k + 1]![c]! * f)
  }
  return lut
}

/** The colour scale's top: the 99th percentile of the cells, so one outlier does not wash out the rest. */
export function colorTop(counts: ArrayLike<number>): number {
  const sorted = Float64Array.from(counts).sort()
  return sorted.length ? Math.max(1, sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!) : 1
}

/** RGBA pixels of a columns-wide, experts-high bitmap (row e = expert e, top to bottom). */
export function heatmapPixels(input: HeatmapInput, lut: Uint8Array, top = colorTop(input.counts)): Uint8ClampedArray<ArrayBuffer> {
  const columns = input.steps.length
  const pixels = new Uint8ClampedArray(new ArrayBuffer(columns * input.experts * 4))
  const scale = (LUT_SIZE - 1) / top
  for (let column = 0; column < columns; column++)
    for (let e = 0; e < input.experts; e++) {
      const level = Math.min(LUT_SIZE - 1, Math.max(0, Math.round((input.counts[column * input.experts + e] ?? 0) * scale)))
      const p = (e * columns + column) * 4
      pixels[p] = lut[level * 3]!
      pixels[p + 1] = lut[level * 3 + 1]!
      pixels[p + 2] = lut[level * 3 + 2]!
      pixels[p + 3] = 255
    }
  return pixels
}

/** The cell under a point of the plot area (CSS pixels from its top-left), or null outside it. */
export function cellAt(input: { steps: readonly number[]; experts: number }, x: number, y: number, width: number, height: number): { column: number; expert: number } | null {
  if (x < 0 || y < 0 || x >= width || y >= height || input.steps.length === 0) return null
  return { column: Math.floor((x / width) * input.steps.length), expert: Math.floor((y / height) * input.experts) }
}

export function cellLabel(input: HeatmapInput, column: number, expert: number): string {
  const from = input.steps[column]!
  const value = input.counts[column * input.experts + expert] ?? 0
  const where = input.bucketSize > 1 ? `steps ${from}–${(input.steps[column + 1] ?? from + input.bucketSize) - 1} (mean)` : `step ${from}`
  if (input.values === 'bias') return `${where} · expert ${expert}: selection bias ${formatBias(value + (input.floor ?? 0))}`
  return `${where} · expert ${expert}: ${Math.round(value).toLocaleString()} tokens`
}

/** A bias to 4 significant digits with its sign: "+1.250e-3", "0". */
export function formatBias(v: number): string {
  return v === 0 ? '0' : `${v > 0 ? '+' : ''}${v.toExponential(3)}`
}

/** The axes around the bitmap (no series: the cells are not ECharts shapes). */
export function replayHeatmapAxesOption(input: HeatmapInput, palette: ReplayPalette): EChartsOption {
  return {
    animation: false,
    grid: { ...HEATMAP_GRID },
    xAxis: {
      type: 'category',
      data: input.steps.map(String),
      name: input.bucketSize > 1 ? `step (columns of ~${input.bucketSize} steps, mean ${input.values === 'bias' ? 'bias' : 'tokens'})` : 'step',
      nameLocation: 'middle',
      nameGap: 26,
      nameTextStyle: { color: palette.muted },
      axisLabel: { color: palette.muted },
      axisLine: { lineStyle: { color: palette.grid } },
      axisTick: { show: false },
    },
    yAxis: {
      type: 'category',
      data: Array.from({ length: input.experts }, (_, e) => `E${e}`),
      inverse: true,
      axisLabel: { color: palette.muted, interval: input.experts > 16 ? Math.ceil(input.experts / 16) - 1 : 0 },
      axisLine: { lineStyle: { color: palette.grid } },
      axisTick: { show: false },
    },
    series: [],
  }
}
