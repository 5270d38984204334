// The replay's keyboard map, separate from the DOM so it can be tested and shown as a help line.

export type ReplayCommand =
  | { kind: 'togglePlay' }
  | { kind: 'step'; delta: number }
  | { kind: 'spike'; direction: 1 | -1 }
  | { kind: 'layer'; delta: 1 | -1 }

export interface KeyPress {
  key: string
  shiftKey: boolean
  ctrlKey: boolean
  metaKey: boolean
  altKey: boolean
}

export const SHORTCUT_HELP: readonly [keys: string, action: string][] = [
  ['Space', 'play / pause'],
  ['← →', 'step'],
  ['Shift+← →', '±10 steps'],
  ['PgUp PgDn', 'previous / next spike'],
  ['[ ]', 'previous / next layer'],
]

export function commandForKey(press: KeyPress): ReplayCommand | null {
  // Browser and OS shortcuts (Ctrl+←, Alt+←) keep their meaning.
  if (press.ctrlKey || press.metaKey || press.altKey) return null
  switch (press.key) {
    case ' ':
      return { kind: 'togglePlay' }
    case 'ArrowLeft':
      return { kind: 'step', delta: press.shiftKey ? -10 : -1 }
    case 'ArrowRight':
      return { kind: 'step', delta: press.shiftKey ? 10 : 1 }
    case 'PageUp':
      return { kind: 'spike', direction: -1 }
    case 'PageDown':
      return { kind: 'spike', direction: 1 }
    case '[':
      return { kind: 'layer', delta: -1 }
    case ']':
      return { kind: 'layer', delta: 1 }
    default:
      return null
  }
}

/** Typing into a text field or choosing in a select keeps its own keys; a slider's keys are ours. */
export function keyBelongsToField(target: { tagName?: string; type?: string; isContentEditable?: boolean } | null): boolean {
  if (!target?.tagName) return false
  if (target.isContentEditable) return true
  const tag = target.tagName.toUpperCase()
  if (tag === 'TEXTAREA' || tag === 'SELECT') return true
  return tag === 'INPUT' && target.type !== 'range' && target.type !== 'checkbox' && target.type !== 'button'
}
