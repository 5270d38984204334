// The renderer's API client, bound to this page on first use: the preload bridge inside Electron,
// otherwise a WebSocket back to the host that served the page. The client itself lives in
// main/api/client/ next to the contract, so it is compiled and tested with it.
import { createApiClient, type ApiClient } from '../../main/api/client/client'
import { selectTransport } from '../../main/api/client/select-transport'
import type { SocketLike } from '../../main/api/client/socket-transport'
import type { PreloadApi } from '../../main/api/wire'

let client: ApiClient | undefined

export function api(): ApiClient {
  client ??= createApiClient(
    selectTransport({
      api: (window as { api?: PreloadApi }).api,
      location: window.location,
      connect: (url) => new WebSocket(url) as SocketLike,
    }),
  )
  return client
}

export { ApiError } from '../../main/api/client/errors'
export type { ApiClient } from '../../main/api/client/client'
export type { ConnectionState } from '../../main/api/client/transport'
