// `moe-workbench verify`: a run's checkpoints against their checksums.json; exit 1 naming a corrupt file.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'

import { describe, expect, it } from 'vitest'

import { verify } from '../../main/cli/commands/verify'
import type { CliContext } from '../../main/cli/context'
import { createHost } from '../../main/host/host'
import { runRecord, tempDir } from './store-fixtures'

function checkpoint(dir: string, files: Record<string, string>, manifest = true): void {
  mkdirSync(dir, { recursive: true })
  const listed: Record<string, { bytes: number; crc32: string }> = {}
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(dir, name), text)
    listed[name] = { bytes: Buffer.byteLength(text), crc32: crc32(text).toString(16).padStart(8, '0') }
  }
  if (manifest) writeFileSync(join(dir, 'checksums.json'), JSON.stringify({ format: 'moe-engine-checksums', version: 1, files: listed }))
}

describe('moe-workbench verify', () => {
  it('lists each checkpoint’s check and fails on a corrupt one, naming the file', async () => {
    const { dir, cleanup } = tempDir()
    try {
      const setup = await createHost({ dataDir: dir, recoverRuns: false })
      setup.store.insertRun(runRecord('r1', { status: 'stopped', step: 3 }))
      const at = (step: number) => join(dir, 'runs', 'r1', `checkpoint-${step}`)
      checkpoint(at(1), { 'config.json': '{}', 'model.safetensors': 'weights-1' }, false)
      checkpoint(at(2), { 'config.json': '{}', 'model.safetensors': 'weights-2' })
      checkpoint(at(3), { 'config.json': '{}', 'model.safetensors': 'weights-3' })
      writeFileSync(join(at(3), 'model.safetensors'), 'weights-X')
      for (const step of [1, 2, 3]) setup.store.addCheckpoint({ runId: 'r1', step, path: at(step), createdAt: step, bytes: 9 })
      await setup.close()

      const out: string[] = []
      const err: string[] = []
      const ctx: CliContext = {
        out: { write: (t: string) => out.push(t) }, err: { write: (t: string) => err.push(t) }, dataDir: dir,
        openHost: (options) => createHost({ dataDir: dir, ...options }), onInterrupt: () => () => {},
      }
      expect(await verify(['r1'], ctx)).toBe(1)
      expect(out.join('')).toMatch(/1\s+no checksums \(older checkpoint\)/)
      expect(out.join('')).toMatch(/2\s+ok \(2 files\)/)
      expect(out.join('')).toMatch(/3\s+CORRUPT/)
      expect(err.join('')).toMatch(/^step 3: .*checkpoint-3\/model\.safetensors: checksum mismatch: crc32 [0-9a-f]{8} over 9 bytes, but checksums.json recorded [0-9a-f]{8} over 9 bytes/)
      out.length = 0
      expect(await verify(['r1', '--step', '2'], ctx)).toBe(0)
      expect(out.join('')).not.toContain('checkpoint-3')
    } finally {
      cleanup()
    }
  })
})
