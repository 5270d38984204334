// Strict UTF-8 decoding whose error names the first bad byte offset.
import { DatasetError } from './errors'

const strict = new TextDecoder('utf-8', { fatal: true })

function firstInvalidByte(bytes: Uint8Array): number {
  // Bisect on prefixes; streaming mode accepts a prefix that ends inside a valid sequence.
  let lo = 0
  let hi = bytes.length
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, mid), { stream: true })
      lo = mid
    } catch {
      hi = mid
    }
  }
  return Math.max(0, hi - 1)
}

export function decodeUtf8(file: string, bytes: Uint8Array): string {
  try {
    return strict.decode(bytes)
  } catch {
    throw new DatasetError(file, `is not valid UTF-8 text (byte ${firstInvalidByte(bytes)}); a tokenizer.json needs text`)
  }
}
