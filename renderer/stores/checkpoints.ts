// Checkpoints of one run and exports of them to Hugging Face layouts. The list comes from
// runs.get (the host records every checkpoint it writes); an export runs in the host and its
// state (in flight, done with the written directory, failed) is kept per checkpoint step.
import { defineStore } from 'pinia'
import { computed, ref, shallowRef } from 'vue'

import type { RunConfig } from '../../main/api/config'
import type { Checkpoint, ExportFormat, Params, RunSummary } from '../../main/api/contract'
import { api, type ApiClient } from '../api'
import { detailOf } from './notices'

export type ExportRequest = Params<'checkpoints.export'>
export type ExportState =
  | { state: 'running'; dir: string; format: ExportFormat }
  | { state: 'done'; dir: string; format: ExportFormat }
  | { state: 'failed'; message: string }

export const useCheckpointsStore = defineStore('checkpoints', () => {
  const runId = ref<string | null>(null)
  const summary = shallowRef<RunSummary | null>(null)
  const config = shallowRef<RunConfig | null>(null) // the run's config: its checkpoints' model
  const init = shallowRef<string | null>(null) // the weights the run started from
  const list = shallowRef<Checkpoint[]>([])
  const loading = ref(false)
  const error = ref<string | null>(null)
  const exports = ref<Record<string, ExportState>>({}) // by `${runId}@${step}`

  const newestFirst = computed(() => [...list.value].sort((a, b) => b.step - a.step))

  async function load(id: string, client: ApiClient = api()): Promise<void> {
    runId.value = id
    loading.value = true
    try {
      const detail = await client.invoke('runs.get', { id })
      if (runId.value !== id) return
      summary.value = detail.summary
      config.value = detail.config
      init.value = detail.init
      list.value = detail.checkpoints
      error.value = null
    } catch (failure) {
      if (runId.value === id) error.value = detailOf(failure)
    } finally {
      if (runId.value === id) loading.value = false
    }
  }

  const exportKey = (id: string, step: number | undefined) => `${id}@${step ?? 'latest'}`

  function exportState(id: string, step: number | undefined): ExportState | undefined {
    return exports.value[exportKey(id, step)]
  }

  /** Exports and resolves to the written directory; failures are kept in the export's state and rethrown. */
  async function exportCheckpoint(request: ExportRequest, client: ApiClient = api()): Promise<string> {
    const key = exportKey(request.id, request.step)
    const format = request.format ?? 'merged'
    exports.value[key] = { state: 'running', dir: request.dir, format }
    try {
      const { dir } = await client.invoke('checkpoints.export', request)
      exports.value[key] = { state: 'done', dir, format }
      return dir
    } catch (failure) {
      exports.value[key] = { state: 'failed', message: detailOf(failure) }
      throw failure
    }
  }

  return { runId, summary, config, init, list, newestFirst, loading, error, exports, load, exportState, exportCheckpoint }
})
