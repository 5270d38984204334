// The Replay view's state: which run, layer and step, playback, and the data behind them. Large
// arrays live in shallow refs (never deep-reactive); every read is cached so that scrubbing asks the
// host only for the one step's arrays (coalesced) and never for the whole range again.
import { defineStore } from 'pinia'
import { computed, ref, shallowRef } from 'vue'

import type { RunConfig } from '../../main/api/config'
import type { Result, RunSummary, StepLoads } from '../../main/api/contract'
import { api, type ApiClient } from '../api'
import { imbalanceSeries, quantile } from '../replay/imbalance'
import { latestRequester, type LatestRequester } from '../replay/latest-request'
import { initialPlayback, playback as reducePlayback, type PlaybackAction } from '../replay/playback'
import { requestCache } from '../replay/request-cache'
import { findSpikes, nextSpike, previousSpike } from '../replay/spikes'
import { alignedWindow } from '../replay/step-index'

type ExpertLoad = Result<'metrics.expertLoad'>

/** Columns of the whole-run heatmap: about one per pixel of a wide window. */
export const OVERVIEW_COLUMNS = 1000
/** Steps per full-resolution read behind the imbalance ratios (the API's maxSteps limit). */
const RATIO_CHUNK = 2000
/** Steps fetched ahead of the current one while scrubbing or playing. */
const PREFETCH_STEPS = 2
export const ZOOM_WINDOWS = [null, 1000, 200] as const
export type ZoomWindow = (typeof ZOOM_WINDOWS)[number]

export interface LayerRatios {
  layer: number
  steps: Int32Array
  ratios: Float64Array
  /** From bucket means while the full-resolution chunks are still on their way. */
  approximate: boolean
}

export interface HeatmapData {
  layer: number
  load: ExpertLoad
  bucketSize: number
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e))

export const useReplayStore = defineStore('replay', () => {
  const runId = ref<string | null>(null)
  const summary = shallowRef<RunSummary | null>(null)
  const config = shallowRef<RunConfig | null>(null)
  const error = ref<string | null>(null)
  const loading = ref(false)
  const experts = shallowRef<number[]>([]) // per MoE layer
  const layer = ref(0)
  const state = ref(initialPlayback(1, 1))
  const zoom = ref<ZoomWindow>(null)
  const heatmap = shallowRef<HeatmapData | null>(null)
  const ratios = shallowRef<LayerRatios | null>(null)
  const thresholdChoice = ref<number | null>(null) // null: the layer's p95
  const shown = shallowRef<StepLoads | null>(null) // the step loads on screen
  const stepError = ref<string | null>(null)

  let client: ApiClient | undefined
  let loads = requestCache<ExpertLoad>()
  const ratiosByLayer = new Map<number, LayerRatios>()
  let stepLoads: LatestRequester<number, StepLoads> | undefined
  let generation = 0 // bumps on open(): answers for an earlier run are dropped

  const layers = computed(() => experts.value.length)
  const step = computed(() => state.value.step)
  const p95 = computed(() => (ratios.value ? quantile(ratios.value.ratios, 0.95) : Number.NaN))
  const threshold = computed(() => thresholdChoice.value ?? p95.value)
  const spikes = computed(() => (ratios.value ? findSpikes(ratios.value.steps, ratios.value.ratios, threshold.value) : []))
  const layerLoads = computed(() => shown.value?.layers[layer.value] ?? null)

  function expertLoad(l: number, fromStep: number, toStep: number, maxSteps: number): Promise<ExpertLoad> {
    const id = runId.value!
    return loads.get(`${l}:${fromStep}:${toStep}:${maxSteps}`, () =>
      client!.invoke('metrics.expertLoad', { id, layer: l, fromStep, toStep, maxSteps }),
    )
  }

  async function open(id: string, start: { layer?: number; step?: number } = {}, using: ApiClient = api()): Promise<void> {
    const mine = ++generation
    client = using
    runId.value = id
    loads = requestCache<ExpertLoad>()
    ratiosByLayer.clear()
    resetData()
    error.value = null
    loading.value = true
    try {
      const detail = await client.invoke('runs.get', { id })
      if (mine !== generation) return
      summary.value = detail.summary
      config.value = detail.config
      const last = detail.summary.step
      if (last < 1) {
        experts.value = []
        return
      }
      const first = await client.invoke('metrics.stepLoads', { id, step: 1 }).then(
        (s) => s,
        () => null,
      )
      if (mine !== generation) return
      experts.value = first ? first.layers.map((l) => l.tokens.length) : []
      layer.value = Math.min(Math.max(0, start.layer ?? 0), Math.max(0, experts.value.length - 1))
      state.value = initialPlayback(1, last, start.step ?? 1, state.value.speed)
      stepLoads = latestRequester<number, StepLoads>({
        fetch: (s) => client!.invoke('metrics.stepLoads', { id, step: s }),
        onAnswer: (_, answer) => {
          if (mine !== generation) return
          shown.value = answer
          stepError.value = null
        },
        onError: (s, e) => {
          if (mine === generation) stepError.value = `step ${s}: ${message(e)}`
        },
      })
      if (first) stepLoads.warm(1)
      await showLayer(mine)
    } catch (e) {
      if (mine === generation) error.value = message(e)
    } finally {
      if (mine === generation) loading.value = false
    }
  }

  function resetData(): void {
    summary.value = null
    config.value = null
    heatmap.value = null
    ratios.value = null
    shown.value = null
    stepError.value = null
    thresholdChoice.value = null
  }

  // The heatmap first (it is what the view paints first), then the full-resolution ratios behind it.
  async function showLayer(mine = generation): Promise<void> {
    if (experts.value.length === 0) return
    const l = layer.value
    stepLoads?.want(state.value.step)
    await refreshHeatmap(mine)
    if (mine !== generation || l !== layer.value) return
    const cached = ratiosByLayer.get(l)
    if (cached) ratios.value = cached
    else await loadRatios(l, mine)
  }

  async function refreshHeatmap(mine = generation): Promise<void> {
    const { first, last } = state.value
    const l = layer.value
    const win = zoom.value === null ? { fromStep: first, toStep: last } : alignedWindow(state.value.step, zoom.value, first, last)
    const columns = zoom.value === null ? OVERVIEW_COLUMNS : zoom.value
    try {
      const load = await expertLoad(l, win.fromStep, win.toStep, columns)
      if (mine !== generation || l !== layer.value) return
      const current = heatmap.value
      if (current?.load === load) return
      heatmap.value = { layer: l, load, bucketSize: Math.max(1, Math.round((win.toStep - win.fromStep + 1) / Math.max(1, load.steps.length))) }
      if (!ratiosByLayer.has(l) && zoom.value === null && ratios.value?.layer !== l)
        ratios.value = { layer: l, steps: Int32Array.from(load.steps), ratios: imbalanceSeries(load.counts, load.experts), approximate: true }
    } catch (e) {
      if (mine === generation) error.value = message(e)
    }
  }

  async function loadRatios(l: number, mine: number): Promise<void> {
    const { first, last } = state.value
    const id = runId.value!
    const steps: number[] = []
    const parts: Float64Array[] = []
    for (let from = first; from <= last; from += RATIO_CHUNK) {
      const part = await client!.invoke('metrics.expertLoad', { id, layer: l, fromStep: from, toStep: Math.min(last, from + RATIO_CHUNK - 1), maxSteps: RATIO_CHUNK })
      if (mine !== generation) return
      steps.push(...part.steps)
      parts.push(imbalanceSeries(part.counts, part.experts))
    }
    const all = new Float64Array(steps.length)
    let offset = 0
    for (const part of parts) {
      all.set(part, offset)
      offset += part.length
    }
    const full: LayerRatios = { layer: l, steps: Int32Array.from(steps), ratios: all, approximate: false }
    ratiosByLayer.set(l, full)
    if (l === layer.value) ratios.value = full
  }

  function setLayer(next: number): void {
    const clamped = Math.min(Math.max(0, next), Math.max(0, layers.value - 1))
    if (clamped === layer.value) return
    layer.value = clamped
    void showLayer()
  }

  function setZoom(next: ZoomWindow): void {
    zoom.value = next
    void refreshHeatmap()
  }

  function dispatch(action: PlaybackAction): void {
    const before = state.value
    const after = reducePlayback(before, action)
    if (after === before) return
    state.value = after
    if (after.step !== before.step) onStepChanged(before.step, after.step)
  }

  function onStepChanged(from: number, to: number): void {
    stepLoads?.want(to)
    // Fetch the next steps in the direction of travel while this one is drawn.
    const direction = to >= from ? 1 : -1
    for (let k = 1; k <= PREFETCH_STEPS; k++) {
      const ahead = to + direction * k
      if (ahead >= state.value.first && ahead <= state.value.last) stepLoads?.warm(ahead)
    }
    if (zoom.value !== null) {
      const { first, last } = state.value
      const a = alignedWindow(from, zoom.value, first, last)
      const b = alignedWindow(to, zoom.value, first, last)
      if (a.fromStep !== b.fromStep) void refreshHeatmap()
    }
  }

  function jumpToSpike(direction: 1 | -1): boolean {
    const target = direction > 0 ? nextSpike(spikes.value, step.value) : previousSpike(spikes.value, step.value)
    if (target) dispatch({ type: 'seek', step: target.step })
    return target !== undefined
  }

  function setThreshold(value: number | null): void {
    thresholdChoice.value = value !== null && Number.isFinite(value) ? value : null
  }

  return {
    runId, summary, config, error, loading, experts, layer, layers, state, step, zoom, heatmap, ratios, threshold, thresholdChoice, p95,
    spikes, shown, layerLoads, stepError,
    open, setLayer, setZoom, dispatch, jumpToSpike, setThreshold,
  }
})
