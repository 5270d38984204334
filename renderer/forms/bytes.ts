// Byte counts as people read them (binary units, as the planner's explanation uses).
export function formatBytes(bytes: number | null): string {
  if (bytes === null || !Number.isFinite(bytes)) return '—'
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes
  let unit = 0
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${unit === 0 ? value.toFixed(0) : value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`
}
