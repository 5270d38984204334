// The placement across devices of the run open in Replay: its placement settings (null when its experts run
// inside the MoE layers, one device without a pipeline, and it records none; the section's defaults for one
// pipelined device without a placement section) and one MoE layer's series over the run (imbalance before and
// after the policy, spilled tokens, weight copies, critical and predicted ms), each layer read once. One step's
// loads, execution and peaks per device come with that step's loads in the replay store.
import { defineStore } from 'pinia'
import { ref, shallowRef } from 'vue'

import { PlacementConfigSchema, runsOnDevices, type PlacementConfig, type RunConfig } from '../../main/api/config'
import type { PlacementSeries } from '../../main/api/contract'
import { api, type ApiClient } from '../api'
import { requestCache } from '../replay/request-cache'

/** Steps of a layer's series on screen: one per pixel of a wide chart, and the API's most. */
export const PLACEMENT_POINTS = 2000

const message = (e: unknown) => (e instanceof Error ? e.message : String(e))

export const usePlacementStore = defineStore('placement', () => {
  const settings = shallowRef<PlacementConfig | null>(null)
  const series = shallowRef<PlacementSeries | null>(null)
  const error = ref<string | null>(null)

  let client: ApiClient | undefined
  let runId: string | null = null
  let cache = requestCache<PlacementSeries>()
  let generation = 0 // bumps on open(): answers for an earlier run are dropped
  let wanted = -1 // the layer asked for last: an earlier layer's late answer is dropped

  function open(id: string, config: Pick<RunConfig, 'placement' | 'pipeline'> | undefined, using: ApiClient = api()): void {
    generation++
    client = using
    runId = id
    cache = requestCache<PlacementSeries>()
    settings.value = config && runsOnDevices(config) ? (config.placement ?? PlacementConfigSchema.parse({})) : null
    series.value = null
    error.value = null
  }

  /** Reads the layer's series over steps 1 … lastStep; nothing for a run that places nothing. */
  async function showLayer(layer: number, lastStep: number): Promise<void> {
    if (!settings.value || runId === null || !client) return
    const mine = generation
    const id = runId
    const using = client
    wanted = layer
    try {
      const answer = await cache.get(`${layer}:${lastStep}`, () =>
        using.invoke('metrics.placement', { id, layer, fromStep: 1, toStep: lastStep, maxPoints: PLACEMENT_POINTS }),
      )
      if (mine !== generation || layer !== wanted) return
      series.value = answer
      error.value = null
    } catch (e) {
      if (mine === generation && layer === wanted) error.value = message(e)
    }
  }

  return { settings, series, error, open, showLayer }
})
