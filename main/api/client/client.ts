// The renderer's typed view of the contract. Whatever the transport, params are checked before they
// leave (so forms get field paths without a round trip) and results and events are checked when
// they arrive (so a store never holds data the contract does not describe).
import {
  events,
  issuesOf,
  requests,
  type EventName,
  type EventPayload,
  type Params,
  type RequestName,
  type Result,
} from '../contract'
import { ReplySchema } from '../wire'
import { ApiError } from './errors'
import type { ConnectionState, Transport } from './transport'

export interface ApiClient {
  readonly transport: Transport['kind']
  invoke<N extends RequestName>(name: N, params: Params<N>): Promise<Result<N>>
  on<E extends EventName>(event: E, listener: (payload: EventPayload<E>) => void): () => void
  onConnection(listener: (state: ConnectionState) => void): () => void
  close(): void
}

export function createApiClient(transport: Transport): ApiClient {
  return {
    transport: transport.kind,

    async invoke<N extends RequestName>(name: N, params: Params<N>): Promise<Result<N>> {
      const checkedParams = requests[name].params.safeParse(params)
      if (!checkedParams.success)
        throw new ApiError(name, { code: 'invalid-params', message: `${name}: invalid params`, issues: issuesOf(checkedParams.error) })
      const reply = ReplySchema.safeParse(await transport.request(name, params))
      if (!reply.success) throw new ApiError(name, { code: 'bad-message', message: `${name}: malformed reply`, issues: issuesOf(reply.error) })
      if ('error' in reply.data) throw new ApiError(name, reply.data.error)
      const result = requests[name].result.safeParse(reply.data.result)
      if (!result.success)
        throw new ApiError(name, { code: 'invalid-result', message: `${name}: the host answered with a malformed result`, issues: issuesOf(result.error) })
      return result.data as Result<N>
    },

    on<E extends EventName>(event: E, listener: (payload: EventPayload<E>) => void): () => void {
      return transport.subscribe(event, (payload) => {
        const checked = events[event].safeParse(payload)
        if (checked.success) listener(checked.data as EventPayload<E>)
        else console.error(`ignored a malformed "${event}" event:`, issuesOf(checked.error))
      })
    },

    onConnection: (listener) => transport.onConnection(listener),
    close: () => transport.close(),
  }
}
