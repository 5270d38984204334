// Runs as the host reports them. The host is the source of truth: the list is read with `runs.list`
// and kept current by `run.status` (whole summaries) and `run.step` (progress between summaries).
import { defineStore } from 'pinia'
import { computed, ref } from 'vue'

import type { EventPayload, RunSummary } from '../../main/api/contract'
import { api, type ApiClient } from '../api'

export const useRunsStore = defineStore('runs', () => {
  const byId = ref<Record<string, RunSummary>>({})
  const loaded = ref(false)
  const loading = ref(false)
  const error = ref<string | null>(null)

  const runs = computed(() => Object.values(byId.value).sort((a, b) => b.createdAt - a.createdAt))

  // Events that arrive while a list request is out are replayed over its answer, which may predate them.
  let eventsDuringRefresh: (() => void)[] | undefined

  function applyStatus(summary: RunSummary): void {
    byId.value[summary.id] = summary
  }

  function applyStep({ id, metrics }: EventPayload<'run.step'>): void {
    const run = byId.value[id]
    if (!run || metrics.step < run.step) return
    byId.value[id] = { ...run, step: metrics.step, lastLoss: metrics.loss, tokensPerSec: metrics.tokens_per_s }
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

  return { byId, runs, loaded, loading, error, refresh, follow, applyStatus, applyStep }
})
