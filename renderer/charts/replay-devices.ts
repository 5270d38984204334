// Tokens per device for the current step: before placement (static e mod D) and after it, with the
// spilled-away part stacked on the after bar. Updated every step with series data only (merge mode);
// the whole option is rebuilt only when the device count changes.
import type { EChartsOption } from 'echarts'

import type { DeviceLoads } from '../replay/devices'
import type { ReplayPalette } from './replay-palette'

export function deviceLabels(loads: DeviceLoads): string[] {
  return loads.devices === null ? ['device'] : Array.from({ length: loads.devices }, (_, d) => `dev ${d}`)
}

/** The per-step update: only series data, merged by series id into the built option. */
export function deviceBarsData(loads: DeviceLoads): EChartsOption {
  return {
    series: [
      { id: 'before', data: loads.before },
      { id: 'after', data: loads.after.map((t, d) => t - (loads.spilledAway[d] ?? 0)) },
      { id: 'spilled', data: loads.spilledAway },
    ],
  }
}

export function replayDevicesOption(loads: DeviceLoads, palette: ReplayPalette): EChartsOption {
  const data = deviceBarsData(loads).series as { id: string; data: number[] }[]
  const bar = (id: string, name: string, color: string, stack: string) => ({
    id,
    name,
    type: 'bar' as const,
    stack,
    data: data.find((s) => s.id === id)!.data,
    itemStyle: { color },
    barMaxWidth: 28,
  })
  return {
    animation: false,
    grid: { left: 56, right: 12, top: 30, bottom: 24 },
    legend: { top: 0, textStyle: { color: palette.muted }, itemWidth: 12, itemHeight: 8 },
    tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' } },
    xAxis: {
      type: 'category',
      data: deviceLabels(loads),
      axisLabel: { color: palette.muted },
      axisLine: { lineStyle: { color: palette.grid } },
    },
    yAxis: { type: 'value', axisLabel: { color: palette.muted }, splitLine: { lineStyle: { color: palette.grid } } },
    series: [
      bar('before', 'before placement (e mod D)', palette.muted, 'before'),
      bar('after', 'after placement', palette.accent, 'after'),
      bar('spilled', 'spilled to other devices', palette.warn, 'after'),
    ],
  }
}
