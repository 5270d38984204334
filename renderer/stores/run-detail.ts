// One open run: its detail (config, events, checkpoints), its metric history, the expert load of
// one layer for the heatmap and the imbalance of every MoE layer. History is read when the view opens
// and again on every reconnect (events sent while the socket was down are gone); between reads,
// live `run.step` events are coalesced so the charts redraw at most four times a second. Live steps
// carry no offload telemetry, so an offloaded run's offload series is read again, from its last step,
// at most once a second while steps arrive, and when the run stops.
import { defineStore } from 'pinia'
import { computed, ref, shallowRef } from 'vue'

import type { EventPayload, Result, RunEvent } from '../../main/api/contract'
import { moeLayerIndexes } from '../../main/api/model-families'
import { api, type ApiClient } from '../api'
import { imbalanceOverSteps, imbalanceRatio, type LayerImbalance } from '../charts/imbalance'
import { OFFLOAD_METRICS } from '../charts/offload'
import type { ExpertLoad, MetricSeries, Point } from '../charts/series'
import { coalesce } from './coalesce'
import { METRICS, appendExpertLoad, appendPoints, appendSeries, appendSteps, emptySeries } from './metric-history'

export type RunDetail = Result<'runs.get'>

export const HEATMAP_STEPS = 100
export const IMBALANCE_POINTS = 500
export const OFFLOAD_REFRESH_MS = 1000
const EVENT_LOG_LIMIT = 500

/** MoE layers of a config and their expert counts (n_experts may be one per MoE layer). */
export function moeLayersOf(config: RunDetail['config']): number[] {
  const { n_experts } = config.model
  const count = moeLayerIndexes(config.model).length
  return Array.from({ length: count }, (_, l) => (Array.isArray(n_experts) ? (n_experts[l] ?? 0) : n_experts))
}

export const useRunDetailStore = defineStore('run-detail', () => {
  const runId = ref<string | null>(null)
  const detail = shallowRef<RunDetail | null>(null)
  const history = shallowRef<MetricSeries>(emptySeries())
  const offloadHistory = shallowRef<MetricSeries>(emptySeries(OFFLOAD_METRICS))
  const liveEvents = shallowRef<RunEvent[]>([])
  const heatmapLayer = ref(0)
  const heatmap = shallowRef<ExpertLoad | null>(null)
  const imbalance = shallowRef<LayerImbalance[]>([])
  const loading = ref(false)
  const error = ref<string | null>(null)

  const expertsPerLayer = computed(() => (detail.value ? moeLayersOf(detail.value.config) : []))
  const offloaded = computed(() => (detail.value?.offload?.mode ?? 'none') !== 'none')
  const events = computed(() => [...(detail.value?.events ?? []), ...liveEvents.value].slice(-EVENT_LOG_LIMIT))

  let client: ApiClient | undefined // set by open(); api() itself needs a window
  const requireClient = (): ApiClient => {
    if (!client) throw new Error('no run is open')
    return client
  }
  let generation = 0 // bumps on every open/close so answers for a previous run are dropped

  const live = coalesce<EventPayload<'run.step'>>((batch) => {
    history.value = appendSteps(history.value, batch.map((b) => b.metrics))
    if (offloaded.value && Date.now() - offloadReadAt >= OFFLOAD_REFRESH_MS) void refreshOffload()
    const load = heatmap.value
    if (load) {
      let next = load
      for (const b of batch) next = appendExpertLoad(next, b.metrics.step, b.expertTokens[load.layer] ?? [], HEATMAP_STEPS)
      heatmap.value = next
    }
    imbalance.value = imbalance.value.map(({ layer, points }) => ({
      layer,
      points: appendPoints(points, batch.map((b): Point => [b.metrics.step, imbalanceRatio(b.expertTokens[layer] ?? [])]), IMBALANCE_POINTS),
    }))
  })

  let offloadReadAt = 0
  let offloadReading = false
  let offloadReadAgain = false

  // One read at a time, each from the step after the last one held; a request during a read reads once more after it.
  async function refreshOffload(current = generation): Promise<void> {
    const id = runId.value
    if (!id) return
    if (offloadReading) {
      offloadReadAgain = true
      return
    }
    offloadReading = true
    offloadReadAt = Date.now()
    try {
      const fromStep = (offloadHistory.value.step.at(-1) ?? 0) + 1
      const fresh = await requireClient().invoke('metrics.series', { id, metrics: [...OFFLOAD_METRICS], fromStep, maxPoints: 2000 })
      if (current === generation) offloadHistory.value = appendSeries(offloadHistory.value, fresh)
    } catch {
      // the next batch of steps, a status change or a reload reads it again
    } finally {
      offloadReading = false
      if (offloadReadAgain && current === generation) {
        offloadReadAgain = false
        void refreshOffload(current)
      }
    }
  }

  async function loadHeatmap(layer: number, current = generation): Promise<void> {
    const id = runId.value
    if (!id) return
    const lastStep = detail.value?.summary.step ?? 0
    const load = await requireClient().invoke('metrics.expertLoad', {
      id,
      layer,
      fromStep: Math.max(0, lastStep - HEATMAP_STEPS + 1),
      maxSteps: HEATMAP_STEPS,
    })
    if (current === generation && layer === heatmapLayer.value) heatmap.value = load
  }

  async function loadImbalance(current: number): Promise<void> {
    const id = runId.value
    if (!id) return
    const layers = await Promise.all(
      expertsPerLayer.value.map(async (_, layer) => {
        const load = await requireClient().invoke('metrics.expertLoad', { id, layer, maxSteps: IMBALANCE_POINTS })
        return { layer, points: imbalanceOverSteps(load) }
      }),
    )
    if (current === generation) imbalance.value = layers
  }

  /** Reads everything about the run afresh (on open and after a reconnect). */
  async function reload(): Promise<void> {
    const id = runId.value
    if (!id) return
    const current = generation
    loading.value = true
    try {
      const [got, series, offload] = await Promise.all([
        requireClient().invoke('runs.get', { id }),
        requireClient().invoke('metrics.series', { id, metrics: [...METRICS], maxPoints: 2000 }),
        requireClient().invoke('metrics.series', { id, metrics: [...OFFLOAD_METRICS], maxPoints: 2000 }),
      ])
      if (current !== generation) return
      detail.value = got
      history.value = series
      offloadHistory.value = offload
      liveEvents.value = []
      if (heatmapLayer.value >= expertsPerLayer.value.length) heatmapLayer.value = 0
      await Promise.all([loadHeatmap(heatmapLayer.value, current), loadImbalance(current)])
      error.value = null
    } catch (failure) {
      if (current === generation) error.value = failure instanceof Error ? failure.message : String(failure)
    } finally {
      if (current === generation) loading.value = false
    }
  }

  async function selectLayer(layer: number): Promise<void> {
    heatmapLayer.value = layer
    heatmap.value = null
    try {
      await loadHeatmap(layer)
    } catch (failure) {
      error.value = failure instanceof Error ? failure.message : String(failure)
    }
  }

  function close(): void {
    generation++
    live.cancel()
    runId.value = null
    detail.value = null
    history.value = emptySeries()
    offloadHistory.value = emptySeries(OFFLOAD_METRICS)
    heatmap.value = null
    imbalance.value = []
    liveEvents.value = []
    error.value = null
  }

  /** Opens a run and follows it live; returns the function that stops following. */
  function open(id: string, withClient: ApiClient = api()): () => void {
    close()
    client = withClient
    runId.value = id
    const subscriber = withClient
    const mine = <T extends { id?: string; runId?: string }>(fn: (payload: T) => void) => (payload: T) => {
      if ((payload.id ?? payload.runId) === runId.value) fn(payload)
    }
    const stops = [
      subscriber.on('run.step', mine((step) => live.push(step))),
      subscriber.on('run.event', mine((event) => (liveEvents.value = [...liveEvents.value, event]))),
      subscriber.on(
        'run.status',
        mine((summary) => {
          if (detail.value) detail.value = { ...detail.value, summary }
          // A checkpoint or finish adds checkpoints; re-read them rather than guessing.
          if (['stopped', 'finished', 'failed', 'paused'].includes(summary.status)) {
            void refreshDetail()
            if (offloaded.value) void refreshOffload()
          }
        }),
      ),
      subscriber.onConnection((state) => {
        if (state === 'open') void reload()
      }),
    ]
    return () => {
      stops.forEach((stop) => stop())
      close()
    }
  }

  async function refreshDetail(): Promise<void> {
    const id = runId.value
    const current = generation
    if (!id) return
    try {
      const got = await requireClient().invoke('runs.get', { id })
      if (current === generation) {
        detail.value = got
        liveEvents.value = liveEvents.value.filter((e) => e.at > (got.events.at(-1)?.at ?? 0))
      }
    } catch {
      // the next reload or status change reads it again
    }
  }

  return {
    runId, detail, history, offloadHistory, offloaded, events, heatmapLayer, heatmap, imbalance, loading, error, expertsPerLayer,
    open, close, reload, refreshDetail, selectLayer, flushLive: () => live.flushNow(),
  }
})
