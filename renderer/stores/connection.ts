// Whether the host is reachable (always, in Electron; in browser mode the WebSocket may drop).
import { defineStore } from 'pinia'
import { ref } from 'vue'

import { api, type ApiClient, type ConnectionState } from '../api'

export const useConnectionStore = defineStore('connection', () => {
  const state = ref<ConnectionState>('connecting')
  const everConnected = ref(false)

  function follow(client: ApiClient = api()): () => void {
    return client.onConnection((next) => {
      state.value = next
      if (next === 'open') everConnected.value = true
    })
  }

  return { state, everConnected, follow }
})
