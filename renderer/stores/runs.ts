// Runs as the host reports them. The host is the source of truth: the list is read with `runs.list`
// and kept current by `run.status` (whole summaries) and `run.step` (progress between summaries).
// Each run also has a small loss sparkline (≈ 50 points) and the controls of the run manager.
import { defineStore } from 'pinia'
import { computed, ref } from 'vue'

import type { EventPayload, RunSummary } from '../../main/api/contract'
import { api, type ApiClient } from '../api'
import type { Point } from '../charts/series'
import { appendPoints } from './metric-history'
import type { RunAction } from './run-actions'

export const SPARKLINE_POINTS = 50

export const useRunsStore = defineStore('runs', () => {
  const byId = ref<Record<string, RunSummary>>({})
  const loaded = ref(false)
  const loading = ref(false)
  const error = ref<string | null>(null)

  const runs = computed(() => Object.values(byId.value).sort((a, b) => b.createdAt - a.createdAt))

  // Events that arrive while a list request is out are replayed over its answer, which may predate them.
  let eventsDuringRefresh: (() => void)[] | undefined

  const sparklines = ref<Record<string, Point[]>>({})
  const busy = ref<Record<string, RunAction | undefined>>({}) // the action in flight per run
  // A deleted run's engine may still report on its way down; those reports must not bring it back.
  const deleted = new Set<string>()

  function applyStatus(summary: RunSummary): void {
    if (deleted.has(summary.id)) return
    byId.value[summary.id] = summary
  }

  function applyStep({ id, metrics }: EventPayload<'run.step'>): void {
    const run = byId.value[id]
    if (!run || metrics.step < run.step) return
    byId.value[id] = { ...run, step: metrics.step, lastLoss: metrics.loss, tokensPerSec: metrics.tokens_per_s }
    const line = sparklines.value[id]
    if (line) sparklines.value[id] = appendPoints(line, [[metrics.step, Number.isFinite(metrics.loss) ? metrics.loss : null]], SPARKLINE_POINTS / 2)
  }

  async function loadSparklines(client: ApiClient = api()): Promise<void> {
    const withSteps = runs.value.filter((r) => r.step > 0)
    const loaded = await Promise.allSettled(
      withSteps.map(async (r) => {
        const series = await client.invoke('metrics.series', { id: r.id, metrics: ['loss'], maxPoints: SPARKLINE_POINTS })
        const losses = series.values['loss'] ?? []
        return [r.id, series.step.map((step, i): Point => [step, losses[i] ?? null])] as const
      }),
    )
    // A run without telemetry (or deleted meanwhile) just has no sparkline.
    for (const result of loaded) if (result.status === 'fulfilled') sparklines.value[result.value[0]] = result.value[1]
  }

  async function act(action: RunAction, id: string, client: ApiClient = api()): Promise<void> {
    busy.value[id] = action
    try {
      if (action === 'restart') applyStatus(await client.invoke('runs.restart', { id }))
      else if (action === 'delete') {
        await client.invoke('runs.delete', { id })
        deleted.add(id)
        delete byId.value[id]
        delete sparklines.value[id]
      } else
        await client.invoke(
          ({ pause: 'runs.pause', resume: 'runs.resume', stop: 'runs.stop', checkpoint: 'runs.checkpoint' } as const)[action],
          { id },
        )
    } finally {
      delete busy.value[id]
    }
  }

  function record(apply: () => void): void {
    apply()
    eventsDuringRefresh?.push(apply)
  }

  async function refresh(client: ApiClient = api()): Promise<void> {
    loading.value = true
    const replay: (() => void)[] = []
    eventsDuringRefresh = replay
    try {
      const list = await client.invoke('runs.list', {})
      byId.value = Object.fromEntries(list.map((run) => [run.id, run]))
      for (const apply of replay) apply()
      loaded.value = true
      error.value = null
      void loadSparklines(client)
    } catch (failure) {
      error.value = failure instanceof Error ? failure.message : String(failure)
    } finally {
      if (eventsDuringRefresh === replay) eventsDuringRefresh = undefined
      loading.value = false
    }
  }

  // Subscribes to live updates and re-reads the list whenever the connection (re)opens, since events
  // sent while it was down are gone. Returns the unsubscribe.
  function follow(client: ApiClient = api()): () => void {
    const stops = [
      client.on('run.status', (summary) => record(() => applyStatus(summary))),
      client.on('run.step', (step) => record(() => applyStep(step))),
      client.onConnection((state) => {
        if (state === 'open') void refresh(client)
      }),
    ]
    return () => stops.forEach((stop) => stop())
  }

  return { byId, runs, loaded, loading, error, sparklines, busy, refresh, follow, applyStatus, applyStep, loadSparklines, act }
})
