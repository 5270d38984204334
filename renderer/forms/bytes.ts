// Byte inputs of the forms; parsing and formatting are the shared ones (main/api/bytes.ts).
import { BYTE_UNITS } from '../../main/api/bytes'

export { formatBytes, parseBytes } from '../../main/api/bytes'

/** A byte count as a byte input shows it: the largest unit that writes it exactly in at most three decimals. */
export function bytesInputText(bytes: number): string {
  for (let unit = BYTE_UNITS.length - 1; unit > 0; unit--) {
    const value = bytes / 1024 ** unit
    if (value >= 1 && Math.round(Number(value.toFixed(3)) * 1024 ** unit) === bytes) return `${Number(value.toFixed(3))} ${BYTE_UNITS[unit]}`
  }
  return String(bytes)
}
