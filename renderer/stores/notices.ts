// The global error notice: one place every view reports a failed action to, phrased as what
// happened and what to do about it.
import { defineStore } from 'pinia'
import { ref } from 'vue'

import { ApiError } from '../api'

export interface Notice {
  id: number
  title: string // what failed, e.g. "Could not stop tiny-abc"
  detail: string // the host's message
  advice: string // what to do next
}

export function adviceFor(error: unknown): string {
  if (error instanceof ApiError) {
    switch (error.code) {
      case 'disconnected':
        return 'The host went away. It reconnects by itself; try again once the banner clears.'
      case 'invalid-params':
        return 'Correct the fields named above and try again.'
      case 'invalid-result':
      case 'bad-message':
      case 'unknown-method':
        return 'The window and the host disagree about the API: reload the window, or restart the host if it was updated.'
      case 'failed':
        return 'The host refused it; the message says why. Check the run’s event log for details.'
    }
  }
  return 'Try again; if it keeps failing, reload the window.'
}

export function detailOf(error: unknown): string {
  if (error instanceof ApiError && error.issues.length > 0)
    return error.issues.map((i) => `${i.path || 'params'}: ${i.message}`).join('; ')
  return error instanceof Error ? error.message : String(error)
}

export const useNoticesStore = defineStore('notices', () => {
  const notices = ref<Notice[]>([])
  let nextId = 1

  function report(title: string, error: unknown): Notice {
    const notice = { id: nextId++, title, detail: detailOf(error), advice: adviceFor(error) }
    notices.value = [...notices.value.slice(-2), notice] // the latest three; older ones are stale
    return notice
  }

  function dismiss(id: number): void {
    notices.value = notices.value.filter((n) => n.id !== id)
  }

  /** Runs an action, reporting its failure under `title`; resolves to undefined when it failed. */
  async function attempt<T>(title: string, action: () => Promise<T>): Promise<T | undefined> {
    try {
      return await action()
    } catch (error) {
      report(title, error)
      return undefined
    }
  }

  return { notices, report, dismiss, attempt }
})
