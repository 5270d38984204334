// Global keyboard shortcuts: single keys and "g then x" sequences, ignored while typing in a field.
import type { ViewName } from './router'

export type ShortcutAction = { kind: 'help' } | { kind: 'theme' } | { kind: 'focus-filter' } | { kind: 'go'; view: ViewName }

export interface Shortcut {
  keys: string // space-separated sequence as shown in the help
  description: string
  action: ShortcutAction
}

export const SHORTCUTS: readonly Shortcut[] = [
  { keys: '?', description: 'Show this help', action: { kind: 'help' } },
  { keys: 'g r', description: 'Go to Runs', action: { kind: 'go', view: 'runs' } },
  { keys: 'g m', description: 'Go to Models', action: { kind: 'go', view: 'models' } },
  { keys: 'g n', description: 'New run', action: { kind: 'go', view: 'new' } },
  { keys: 'g c', description: 'Go to Compare', action: { kind: 'go', view: 'compare' } },
  { keys: 'g h', description: 'Go to Hardware', action: { kind: 'go', view: 'hardware' } },
  { keys: '/', description: 'Focus the filter of the current list', action: { kind: 'focus-filter' } },
  { keys: 't', description: 'Switch theme (system → light → dark)', action: { kind: 'theme' } },
]

/** The action for the keys typed so far, 'pending' while they start a longer sequence, or null. */
export function matchShortcut(typed: readonly string[]): ShortcutAction | 'pending' | null {
  const sequence = typed.join(' ')
  const exact = SHORTCUTS.find((s) => s.keys === sequence)
  if (exact) return exact.action
  return SHORTCUTS.some((s) => s.keys.startsWith(`${sequence} `)) ? 'pending' : null
}

export function isTypingTarget(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false
  return target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName)
}
