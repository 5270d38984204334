// One ECharts instance on an element for a component's lifetime, resized with the element.
import { onBeforeUnmount, onMounted, shallowRef, type Ref } from 'vue'

import { paletteFromCss, type ReplayPalette } from '../../charts/replay-palette'
import { echarts, type ECharts } from './echarts-setup'

export function useChart(element: Ref<HTMLElement | null>, onResize?: () => void) {
  const chart = shallowRef<ECharts | null>(null)
  let observer: ResizeObserver | undefined
  onMounted(() => {
    if (!element.value) return
    chart.value = echarts.init(element.value, undefined, { renderer: 'canvas' })
    observer = new ResizeObserver(() => {
      chart.value?.resize()
      onResize?.()
    })
    observer.observe(element.value)
  })
  onBeforeUnmount(() => {
    observer?.disconnect()
    chart.value?.dispose()
    chart.value = null
  })
  return chart
}

export function currentPalette(): ReplayPalette {
  const style = getComputedStyle(document.documentElement)
  return paletteFromCss((name) => style.getPropertyValue(name))
}
