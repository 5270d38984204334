// Checks a checkpoint directory against the checksums.json the engine writes into it (CRC-32 as zlib computes
// it, and the size of every file), so a resume can skip a corrupt checkpoint before an engine is started.
import { closeSync, existsSync, openSync, readFileSync, readSync } from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'

export type CheckpointCheck =
  | { state: 'ok'; files: number }
  /** No checksums.json: written before checksums existed, or a Hugging Face folder. */
  | { state: 'unverified' }
  | { state: 'corrupt'; reason: string }

const CHUNK = 4 << 20

function fileCrc(path: string): { crc: number; bytes: number } {
  const fd = openSync(path, 'r')
  try {
    const buffer = Buffer.allocUnsafe(CHUNK)
    let crc = 0
    let bytes = 0
    for (;;) {
      const got = readSync(fd, buffer, 0, CHUNK, null)
      if (got === 0) return { crc, bytes }
      crc = crc32(buffer.subarray(0, got), crc)
      bytes += got
    }
  } finally {
    closeSync(fd)
  }
}

const hex = (n: number) => n.toString(16).padStart(8, '0')

export function verifyCheckpoint(dir: string): CheckpointCheck {
  const manifestPath = join(dir, 'checksums.json')
  if (!existsSync(manifestPath)) return { state: 'unverified' }
  let files: Record<string, { crc32?: unknown; bytes?: unknown }>
  try {
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { format?: unknown; files?: unknown }
    if (manifest.format !== 'moe-engine-checksums' || typeof manifest.files !== 'object' || manifest.files === null)
      return { state: 'corrupt', reason: `${manifestPath}: not a checksum manifest` }
    files = manifest.files as typeof files
  } catch (e) {
    return { state: 'corrupt', reason: `${manifestPath}: ${e instanceof Error ? e.message : String(e)}` }
  }
  for (const [name, want] of Object.entries(files)) {
    const path = join(dir, name)
    if (!existsSync(path)) return { state: 'corrupt', reason: `${path}: missing, though checksums.json lists it` }
    const got = fileCrc(path)
    if (hex(got.crc) !== want.crc32 || got.bytes !== want.bytes)
      return {
        state: 'corrupt',
        reason: `${path}: checksum mismatch: crc32 ${hex(got.crc)} over ${got.bytes} bytes, but checksums.json recorded ` +
          `${String(want.crc32)} over ${String(want.bytes)} bytes`,
      }
  }
  return { state: 'ok', files: Object.keys(files).length }
}
