// A fake ApiClient for store tests: requests go to fake host handlers (params parsed by the contract,
// so defaults apply as in the real host), events and connection changes are emitted by the test.
import type { ApiClient, ConnectionState } from '../../renderer/api'
import { requests, type EventName, type EventPayload, type RequestName } from '../../main/api/contract'
import { fakeHandlers } from '../unit/contract-fixtures'

type Handlers = ReturnType<typeof fakeHandlers>

export interface FakeClient extends ApiClient {
  handlers: Handlers
  emit<E extends EventName>(event: E, payload: EventPayload<E>): void
  connect(state: ConnectionState): void
  calls(name: RequestName): unknown[]
}

export function fakeClient(overrides: Parameters<typeof fakeHandlers>[0] = {}, initial: ConnectionState = 'open'): FakeClient {
  const handlers = fakeHandlers(overrides)
  const listeners = new Map<string, Set<(payload: unknown) => void>>()
  const connectionListeners = new Set<(state: ConnectionState) => void>()
  let state = initial
  return {
    transport: 'socket',
    handlers,
    invoke: (async (name: RequestName, params: unknown) => {
      const parsed = requests[name].params.parse(params)
      return (handlers[name] as (p: unknown) => Promise<unknown>)(parsed)
    }) as ApiClient['invoke'],
    on(event, listener) {
      const set = listeners.get(event) ?? new Set()
      listeners.set(event, set)
      set.add(listener as (payload: unknown) => void)
      return () => set.delete(listener as (payload: unknown) => void)
    },
    onConnection(listener) {
      connectionListeners.add(listener)
      listener(state)
      return () => connectionListeners.delete(listener)
    },
    close() {},
    emit(event, payload) {
      for (const listener of listeners.get(event) ?? []) listener(payload)
    },
    connect(next) {
      state = next
      for (const listener of connectionListeners) listener(next)
    },
    calls: (name) => handlers.calls.filter((c) => c.name === name).map((c) => c.params),
  }
}

export const flushPromises = () => new Promise((resolve) => setTimeout(resolve, 0))
