// Light and dark themes. The choice ('system' follows prefers-color-scheme) is kept in localStorage;
// the resolved theme is set on <html data-theme> for the CSS and handed to ECharts by name.
import { computed, ref, watchEffect } from 'vue'

export type ThemeChoice = 'system' | 'light' | 'dark'
export type ResolvedTheme = 'light' | 'dark'

const STORAGE_KEY = 'moe-workbench.theme'
const CHOICES: readonly ThemeChoice[] = ['system', 'light', 'dark']

function storedChoice(): ThemeChoice {
  try {
    const value = globalThis.localStorage?.getItem(STORAGE_KEY)
    return CHOICES.includes(value as ThemeChoice) ? (value as ThemeChoice) : 'system'
  } catch {
    return 'system' // storage can be disabled; the theme still works for this session
  }
}

const darkQuery = typeof window === 'undefined' ? undefined : window.matchMedia('(prefers-color-scheme: dark)')
const systemPrefersDark = ref(darkQuery?.matches ?? true)
darkQuery?.addEventListener('change', (event) => (systemPrefersDark.value = event.matches))

const choice = ref<ThemeChoice>(storedChoice())

export const resolvedTheme = computed<ResolvedTheme>(() =>
  choice.value === 'system' ? (systemPrefersDark.value ? 'dark' : 'light') : choice.value,
)

export function useTheme() {
  return { choice, resolved: resolvedTheme, setChoice, cycle }
}

export function setChoice(next: ThemeChoice): void {
  choice.value = next
  try {
    globalThis.localStorage?.setItem(STORAGE_KEY, next)
  } catch {
    // not persisted; the choice still applies until reload
  }
}

/** system → light → dark → system: one button covers the three states. */
export function cycle(): void {
  setChoice(CHOICES[(CHOICES.indexOf(choice.value) + 1) % CHOICES.length]!)
}

export function applyThemeToDocument(): () => void {
  const stop = watchEffect(() => {
    document.documentElement.dataset['theme'] = resolvedTheme.value
    document.documentElement.style.colorScheme = resolvedTheme.value
  })
  return stop
}
