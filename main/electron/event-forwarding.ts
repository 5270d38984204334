// Pushes host events to every open window on the contract's event channels.
import { eventChannel, type EventSink } from '../api/contract'
import { checkedSink } from '../api/event-check'

// The part of Electron's WebContents the forwarder uses.
export interface EventReceiver {
  send(channel: string, payload: unknown): void
  isDestroyed(): boolean
}

export function forwardEvents(
  subscribe: (listener: EventSink) => () => void,
  targets: () => Iterable<EventReceiver>,
): () => void {
  const sink = checkedSink(
    (name, payload) => {
      const channel = eventChannel(name)
      for (const target of targets()) if (!target.isDestroyed()) target.send(channel, payload)
    },
    (name, issues) => console.error(`dropped a malformed "${name}" event:`, issues),
  )
  return subscribe(sink)
}
