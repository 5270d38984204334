// ECharts themes matching the CSS variables of styles/theme.css, so charts switch with the app theme.
import type { ResolvedTheme } from '../theme'

const PALETTES: Record<ResolvedTheme, { text: string; muted: string; grid: string; series: string[]; heat: string[] }> = {
  dark: {
    text: '#e3e6eb',
    muted: '#8b93a1',
    grid: '#2c313a',
    series: ['#6ea8fe', '#f0a35e', '#5cc98b', '#c58af9', '#f07171', '#4fd1c5', '#e6b450', '#a0aec0'],
    heat: ['#1c2433', '#2b5797', '#6ea8fe', '#f0a35e', '#f07171'],
  },
  light: {
    text: '#1f2430',
    muted: '#5c6473',
    grid: '#dde1e7',
    series: ['#2563eb', '#d9771f', '#16a34a', '#9333ea', '#dc2626', '#0d9488', '#ca8a04', '#64748b'],
    heat: ['#eef2f8', '#9ec1f7', '#2563eb', '#d9771f', '#dc2626'],
  },
}

/** The n-th series colour of a theme, for builders that must tie two series to one colour. */
export function seriesColor(theme: ResolvedTheme, index: number): string {
  const colors = PALETTES[theme].series
  return colors[index % colors.length]!
}

export function echartsTheme(theme: ResolvedTheme): Record<string, unknown> {
  const p = PALETTES[theme]
  const axis = {
    axisLine: { lineStyle: { color: p.grid } },
    axisTick: { lineStyle: { color: p.grid } },
    axisLabel: { color: p.muted },
    splitLine: { lineStyle: { color: p.grid } },
    nameTextStyle: { color: p.muted },
  }
  return {
    color: p.series,
    backgroundColor: 'transparent',
    textStyle: { color: p.text },
    legend: { textStyle: { color: p.muted } },
    valueAxis: axis,
    categoryAxis: { ...axis, splitLine: { show: false } },
    visualMap: { inRange: { color: p.heat }, textStyle: { color: p.muted } },
    tooltip: { backgroundColor: theme === 'dark' ? '#1c1f25' : '#ffffff', borderColor: p.grid, textStyle: { color: p.text } },
  }
}
