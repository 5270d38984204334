// A corrupt newest checkpoint: a restart skips it (naming the file and the checksums in the run's events) and
// continues from the newest one that verifies, with the same losses as the uninterrupted run.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'

import { verifyCheckpoint } from '../../main/host/checkpoint-verify'
import { buildEngineWorker, type BuiltWorker } from './helpers/engine-build'
import { tinyConfig, writeCorpusShard } from './helpers/engine-fixtures'
import { createEngineHarness, type EngineHarness } from './helpers/engine-harness'

let worker: BuiltWorker
let h: EngineHarness

beforeAll(async () => {
  worker = await buildEngineWorker()
})
afterAll(() => worker?.dispose())
afterEach(() => h?.close())

function flipByte(path: string, fromEnd: number): void {
  const bytes = readFileSync(path)
  bytes[bytes.length - 1 - fromEnd] = bytes[bytes.length - 1 - fromEnd]! ^ 0x04
  writeFileSync(path, bytes)
}

describe('checkpoint checksums', () => {
  it('restart falls back past a corrupt checkpoint to the newest that verifies, with the same losses', async () => {
    h = createEngineHarness(worker.entry, { concurrency: 1 })
    const shard = writeCorpusShard(join(h.dir, 'corpus.bin'))
    const id = h.manager.create({ name: 'fallback', config: tinyConfig({ steps: 12, checkpoint_every: 4 }), dataset: { path: shard } }).id
    await h.waitForStatus(id, 'finished')
    const original = h.store.series(id, ['loss'], { maxPoints: 2000 }).values.loss
    const checkpoints = h.store.listCheckpoints(id)
    expect(checkpoints.map((c) => c.step)).toEqual([4, 8, 12])
    for (const c of checkpoints) expect(verifyCheckpoint(c.path)).toEqual({ state: 'ok', files: 4 })

    const newest = checkpoints.at(-1)!.path
    flipByte(join(newest, 'model.safetensors'), 5)
    expect(verifyCheckpoint(newest)).toMatchObject({ state: 'corrupt', reason: expect.stringMatching(/model\.safetensors: checksum mismatch: crc32 [0-9a-f]{8} over \d+ bytes/) })

    h.store.updateRun(id, { status: 'failed', error: 'the disk went away' })  // as if the run had crashed after its last checkpoint
    h.manager.restart(id)
    expect(h.store.getRun(id)?.step).toBe(8)
    const messages = h.events(id).map((e) => e.message)
    expect(messages).toContain('restart from the checkpoint at step 8')
    expect(messages.find((m) => m.startsWith('skipped the checkpoint at step 12: '))).toMatch(/checkpoint-12\/model\.safetensors: checksum mismatch/)
    await h.waitForStatus(id, 'finished')
    expect(h.store.series(id, ['loss'], { maxPoints: 2000 }).values.loss).toEqual(original)
  }, 120_000)
})
