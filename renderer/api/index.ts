// The app-wide API client, created on first use from the page's environment. Tests install a client
// over a fake transport with `useApiClient`.
import type { PreloadApi } from '../../main/api/wire'
import { createApiClient, type ApiClient } from './client'
import { selectTransport } from './select-transport'

let client: ApiClient | undefined

export function api(): ApiClient {
  client ??= createApiClient(selectTransport({ api: (window as { api?: PreloadApi }).api, location: window.location }))
  return client
}

export function useApiClient(replacement: ApiClient): void {
  client?.close()
  client = replacement
}

export { ApiError } from './errors'
export type { ApiClient } from './client'
export type { ConnectionState } from './transport'
