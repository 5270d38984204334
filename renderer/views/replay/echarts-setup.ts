// The ECharts pieces the replay draws with, registered once (a smaller bundle than all of ECharts).
import { BarChart, HeatmapChart, LineChart, ScatterChart } from 'echarts/charts'
import { GridComponent, LegendComponent, MarkLineComponent, TitleComponent, TooltipComponent, VisualMapComponent } from 'echarts/components'
import * as echarts from 'echarts/core'
import { CanvasRenderer } from 'echarts/renderers'

echarts.use([
  BarChart, HeatmapChart, LineChart, ScatterChart,
  GridComponent, LegendComponent, MarkLineComponent, TitleComponent, TooltipComponent, VisualMapComponent,
  CanvasRenderer,
])

export { echarts }
export type ECharts = echarts.ECharts
