// Colours of the replay charts, read from the app's CSS variables so they follow the theme.

export interface ReplayPalette {
  text: string
  muted: string
  grid: string
  accent: string
  warn: string
  bad: string
  ok: string
  heat: string[]
}

export const DEFAULT_REPLAY_PALETTE: ReplayPalette = {
  text: '#e3e6eb',
  muted: '#8b93a1',
  grid: '#2c313a',
  accent: '#6ea8fe',
  warn: '#e6b450',
  bad: '#f07171',
  ok: '#5cc98b',
  heat: ['#10131a', '#1d3b6e', '#3b7dd8', '#e6b450', '#f07171'],
}

export function paletteFromCss(read: (name: string) => string): ReplayPalette {
  const pick = (name: string, fallback: string) => read(name).trim() || fallback
  const p = DEFAULT_REPLAY_PALETTE
  return {
    ...p,
    text: pick('--text', p.text),
    muted: pick('--muted', p.muted),
    grid: pick('--border', p.grid),
    accent: pick('--accent', p.accent),
    warn: pick('--warn', p.warn),
    bad: pick('--bad', p.bad),
    ok: pick('--ok', p.ok),
  }
}

/** One colour per device, hues spread evenly around the wheel so neighbouring devices differ most with few devices. */
export function deviceColor(device: number, devices: number): string {
  return `hsl(${Math.round((device * 360) / Math.max(1, devices))}, 62%, 62%)`
}
