// Tokens per device for the current step: before placement (static e mod D) and after it, each device's
// after bar in that device's colour (the colours of the expert grid). Updated every step with series data
// only (merge mode); the whole option is rebuilt only when the device count changes.
import type { EChartsOption } from 'echarts'

import type { DeviceLoads } from '../replay/devices'
import { deviceColor, type ReplayPalette } from './replay-palette'

export function deviceLabels(devices: number): string[] {
  return Array.from({ length: devices }, (_, d) => `dev ${d}`)
}

const afterBars = (loads: DeviceLoads) => loads.after.map((value, d) => ({ value, itemStyle: { color: deviceColor(d, loads.devices) } }))

/** The per-step update: only series data, merged by series id into the built option. */
export function deviceBarsData(loads: DeviceLoads): EChartsOption {
  return { series: [{ id: 'before', data: loads.before }, { id: 'after', data: afterBars(loads) }] }
}

export function replayDevicesOption(loads: DeviceLoads, palette: ReplayPalette): EChartsOption {
  const bar = (id: string, name: string, color: string) => ({ id, name, type: 'bar' as const, itemStyle: { color }, barMaxWidth: 28 })
  return {
    animation: false,
    grid: { left: 56, right: 12, top: 30, bottom: 24 },
    legend: { top: 0, textStyle: { color: palette.muted }, itemWidth: 12, itemHeight: 8 },
    tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' } },
    xAxis: {
      type: 'category',
      data: deviceLabels(loads.devices),
      axisLabel: { color: palette.muted },
      axisLine: { lineStyle: { color: palette.grid } },
    },
    yAxis: { type: 'value', name: 'tokens', nameTextStyle: { color: palette.muted }, axisLabel: { color: palette.muted }, splitLine: { lineStyle: { color: palette.grid } } },
    series: [
      { ...bar('before', 'before placement (e mod D)', palette.muted), data: loads.before },
      { ...bar('after', 'after placement', palette.accent), data: afterBars(loads) },
    ],
  }
}
