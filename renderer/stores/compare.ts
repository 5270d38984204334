// Compare's state: which runs are compared, and for each its detail (config, timing), scalar
// series, the loss of its last steps (for the final-loss summary) and the planner's estimate for its
// config (device bytes, until offload telemetry records measured peaks).
import { defineStore } from 'pinia'
import { computed, ref } from 'vue'

import { ScalarMetricSchema, type Plan, type Result, type RunTotals, type ScalarMetric } from '../../main/api/contract'
import { api, type ApiClient } from '../api'

export type RunDetail = Result<'runs.get'>
export type Series = Result<'metrics.series'>
export type XAxisMode = 'step' | 'time'

export interface ComparedRun {
  detail: RunDetail
  series: Series
  tailLoss: (number | null)[]
  plan: Plan | null
  totals: RunTotals | null
}

const ALL_METRICS = ScalarMetricSchema.options
const TAIL_STEPS = 10
const SERIES_POINTS = 1000

export function parseIds(text: string | undefined): string[] {
  return [...new Set((text ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0))]
}

const message = (failure: unknown) => (failure instanceof Error ? failure.message : String(failure))

async function loadRun(client: ApiClient, id: string): Promise<ComparedRun> {
  const detail = await client.invoke('runs.get', { id })
  const last = detail.summary.step
  const [series, tail, plan, totals] = await Promise.all([
    client.invoke('metrics.series', { id, metrics: [...ALL_METRICS], maxPoints: SERIES_POINTS }),
    last > 0
      ? client.invoke('metrics.series', { id, metrics: ['loss'], fromStep: Math.max(0, last - TAIL_STEPS + 1), maxPoints: TAIL_STEPS * 2 })
      : Promise.resolve(null),
    client.invoke('planner.plan', { config: detail.config }).catch(() => null),
    client.invoke('metrics.totals', { id }).catch(() => null),
  ])
  return { detail, series, tailLoss: tail?.values['loss'] ?? [], plan, totals }
}

export const useCompareStore = defineStore('compare', () => {
  const ids = ref<string[]>([])
  const runs = ref<Record<string, ComparedRun>>({})
  const errors = ref<Record<string, string>>({})
  const loading = ref(false)
  const metric = ref<ScalarMetric>('loss')
  const xAxis = ref<XAxisMode>('step')
  const smoothing = ref(0.6)
  const baselineId = ref<string | null>(null)

  /** The selected runs that have loaded, in selection order. */
  const loaded = computed(() => ids.value.flatMap((id) => (runs.value[id] ? [runs.value[id]] : [])))
  const baseline = computed(() => (baselineId.value && ids.value.includes(baselineId.value) ? baselineId.value : (ids.value[0] ?? null)))

  let generation = 0

  /** Reads every selected run afresh (also how a running run's curves catch up). */
  async function load(client: ApiClient = api()): Promise<void> {
    const current = ++generation
    const wanted = [...ids.value]
    loading.value = true
    const results = await Promise.allSettled(wanted.map((id) => loadRun(client, id)))
    if (current !== generation) return
    const nextRuns: Record<string, ComparedRun> = {}
    const nextErrors: Record<string, string> = {}
    results.forEach((result, i) => {
      const id = wanted[i]!
      if (result.status === 'fulfilled') nextRuns[id] = result.value
      else nextErrors[id] = message(result.reason)
    })
    runs.value = nextRuns
    errors.value = nextErrors
    loading.value = false
  }

  function select(next: string[]): void {
    ids.value = [...new Set(next)]
  }

  return { ids, runs, errors, loading, metric, xAxis, smoothing, baselineId, loaded, baseline, load, select }
})
