// Electron: requests and events go through the preload bridge (`window.api`), which is always up.
import type { PreloadApi } from '../wire'
import type { Transport } from './transport'

export function preloadTransport(bridge: PreloadApi): Transport {
  return {
    kind: 'ipc',
    request: (method, params) => bridge.invoke(method, params),
    subscribe: (event, listener) => bridge.on(event, listener),
    onConnection(listener) {
      listener('open')
      return () => {}
    },
    close: () => {},
  }
}
