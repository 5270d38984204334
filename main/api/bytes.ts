// Byte counts as people read and type them (binary units, as the planner's explanation uses): one parser and
// one formatter for the UI, the CLI and the host.
export const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB']

export function formatBytes(bytes: number | null): string {
  if (bytes === null || !Number.isFinite(bytes)) return '—'
  let value = bytes
  let unit = 0
  while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024
    unit++
  }
  return `${unit === 0 ? value.toFixed(0) : value.toFixed(value < 10 ? 2 : 1)} ${BYTE_UNITS[unit]}`
}

const UNIT_POWER: Record<string, number> = { '': 0, b: 0, k: 1, m: 2, g: 3, t: 4 }

/** "2 GiB", "512M", "1.5 gib", "1048576" -> whole bytes; null when the text is not a byte count. */
export function parseBytes(text: string): number | null {
  const match = /^(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt])(?:i?b)?|(b))?$/i.exec(text.trim())
  if (!match) return null
  const unit = (match[2] ?? match[3] ?? '').toLowerCase()
  return Math.round(Number(match[1]) * 1024 ** UNIT_POWER[unit]!)
}
