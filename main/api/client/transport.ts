// What the client needs from a transport: send one request and get its Reply envelope, hear events,
// and know whether the host is reachable. Transports move data; the client checks it.
import type { EventName, RequestName } from '../contract'
import type { Reply } from '../wire'

export type ConnectionState = 'connecting' | 'open' | 'closed'

export interface Transport {
  readonly kind: 'ipc' | 'socket'
  request(method: RequestName, params: unknown): Promise<Reply>
  subscribe(event: EventName, listener: (payload: unknown) => void): () => void
  // Called at once with the current state, then on every change.
  onConnection(listener: (state: ConnectionState) => void): () => void
  close(): void
}
