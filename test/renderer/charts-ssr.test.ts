// One server-side render through ECharts itself: the loss option builds a real SVG with its line.
import * as echarts from 'echarts'
import { describe, expect, it } from 'vitest'

import { echartsTheme } from '../../renderer/charts/echarts-theme'
import { smoothedLineOption } from '../../renderer/charts/line'

describe('ECharts SVG server-side render', () => {
  it('renders the loss chart with its series path', () => {
    const chart = echarts.init(null, echartsTheme('light'), { renderer: 'svg', ssr: true, width: 400, height: 240 })
    const option = smoothedLineOption({
      series: { step: [1, 2, 3, 4], wallTime: [1, 2, 3, 4], values: { loss: [5, 4, 3.5, 3] } },
      metric: 'loss',
      label: 'loss',
      smoothing: 0.5,
      color: '#2563eb',
    })
    chart.setOption({ ...option, animation: false })
    const svg = chart.renderToSVGString()
    chart.dispose()
    expect(svg.startsWith('<svg')).toBe(true)
    // The smoothed series: a polyline path in the series colour, through four points (M + 3 L).
    const paths = [...svg.matchAll(/<path d="(M[^"]+)"[^>]*stroke="#2563eb"/g)].map((m) => m[1]!)
    expect(paths.length).toBeGreaterThanOrEqual(2) // raw and smoothed
    expect(paths.some((d) => (d.match(/L/g) ?? []).length >= 3)).toBe(true)
    expect(svg).toContain('>step<')
  })
})
