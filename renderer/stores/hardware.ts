// What this machine offers the engine, from hardware.probe, read once per visit (it does not change
// while the app runs, except free memory and disk, which a refresh re-reads).
import { defineStore } from 'pinia'
import { ref, shallowRef } from 'vue'

import type { Hardware } from '../../main/api/contract'
import { api, type ApiClient } from '../api'
import { detailOf } from './notices'

export const useHardwareStore = defineStore('hardware', () => {
  const hardware = shallowRef<Hardware | null>(null)
  const loading = ref(false)
  const error = ref<string | null>(null)

  async function probe(client: ApiClient = api()): Promise<void> {
    loading.value = true
    try {
      hardware.value = await client.invoke('hardware.probe', {})
      error.value = null
    } catch (failure) {
      error.value = detailOf(failure)
    } finally {
      loading.value = false
    }
  }

  return { hardware, loading, error, probe }
})
