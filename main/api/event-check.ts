// Events are checked against the contract before any transport pushes them, so a host bug shows up
// as one logged line in main rather than as malformed data in every window.
import { events, issuesOf, type EventName, type EventPayload, type EventSink } from './contract'

export type EventCheck<E extends EventName> =
  | { ok: true; payload: EventPayload<E> }
  | { ok: false; issues: { path: string; message: string }[] }

export function checkEvent<E extends EventName>(name: E, payload: unknown): EventCheck<E> {
  const parsed = events[name].safeParse(payload)
  return parsed.success ? { ok: true, payload: parsed.data as EventPayload<E> } : { ok: false, issues: issuesOf(parsed.error) }
}

// Wraps a sink so it only ever receives contract-conforming payloads.
export function checkedSink(deliver: EventSink, reject: (name: EventName, issues: { path: string; message: string }[]) => void): EventSink {
  return (name, payload) => {
    const checked = checkEvent(name, payload)
    if (checked.ok) deliver(name, checked.payload)
    else reject(name, checked.issues)
  }
}
