// A chart over steps on the imbalance grid, with the current step as a DOM line over the canvas (moved
// without redrawing the chart) and a click that picks the step under it: Replay's expert and device
// imbalance charts.
import type { EChartsOption } from 'echarts'
import { ref, watch, type Ref } from 'vue'

import { useChart } from './use-chart'

export function useStepChart(element: Ref<HTMLElement | null>, step: () => number, hasSteps: () => boolean, pick: (step: number) => void) {
  const markerX = ref<number | null>(null)
  const chart = useChart(element, placeMarker)

  function placeMarker(): void {
    if (!chart.value || !hasSteps()) return void (markerX.value = null)
    const x = chart.value.convertToPixel({ xAxisIndex: 0 }, step())
    markerX.value = typeof x === 'number' && Number.isFinite(x) ? x : null
  }

  /** Replaces the option; lazy leaves the drawing to the next frame (the marker then waits for a resize or step). */
  function draw(option: EChartsOption, lazy: boolean): void {
    const instance = chart.value
    if (!instance) return
    instance.setOption(option, { notMerge: true, lazyUpdate: lazy })
    instance.getZr().off('click')
    instance.getZr().on('click', (event) => {
      const [picked] = instance.convertFromPixel({ xAxisIndex: 0 }, [event.offsetX, event.offsetY]) as number[]
      if (picked !== undefined && Number.isFinite(picked)) pick(Math.round(picked))
    })
    placeMarker()
  }

  watch(step, placeMarker)
  return { chart, markerX, draw }
}
