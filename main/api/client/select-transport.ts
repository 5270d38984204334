// Picks the transport for a page: the preload bridge inside Electron, otherwise a WebSocket back
// to the host that served the page.
import { SOCKET_PATH, type PreloadApi } from '../wire'
import { preloadTransport } from './preload-transport'
import { socketTransport, type SocketFactory } from './socket-transport'
import type { Transport } from './transport'

export interface PageEnvironment {
  api?: PreloadApi
  location: { href: string }
  connect: SocketFactory
}

export function selectTransport(page: PageEnvironment): Transport {
  if (page.api) return preloadTransport(page.api)
  return socketTransport({ url: socketUrl(page.location.href), connect: page.connect })
}

// The page's own host and port. The token rides along when the page URL still has it; otherwise the
// browser sends the session cookie the server set on the first visit.
export function socketUrl(pageHref: string): string {
  const page = new URL(pageHref)
  const url = new URL(SOCKET_PATH, page)
  url.protocol = page.protocol === 'https:' ? 'wss:' : 'ws:'
  url.search = ''
  url.hash = ''
  const token = page.searchParams.get('token')
  if (token) url.searchParams.set('token', token)
  return url.href
}
