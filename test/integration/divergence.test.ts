// A run that diverges (a NaN planted in one expert's weight of its starting checkpoint): the engine catches it
// at step 1 and pauses it; the host shows it paused with the engine's account (the step, the quantity, the
// expert), and stopping it ends it failed without writing a checkpoint that holds the NaN.
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'

import { loadEngineAddon } from '../../main/host/engine/addon'
import { engineConfigJson } from '../../main/host/runs/engine-config'
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

const BAD = 'layers.1.moe.experts.2.gate_up.weight'

// Overwrites one float32 of a tensor in a safetensors file (8-byte header length, JSON header, data).
function plantNaN(file: string, tensor: string): void {
  const bytes = readFileSync(file)
  const headerLength = Number(bytes.readBigUInt64LE(0))
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8')) as Record<string, { data_offsets: [number, number] }>
  const at = 8 + headerLength + header[tensor]!.data_offsets[0] + 4 * 3
  bytes.writeFloatLE(Number.NaN, at)
  writeFileSync(file, bytes)
}

describe('a diverging run', () => {
  it('is paused at the step it diverged, naming the expert, and never checkpointed with the NaN', async () => {
    h = createEngineHarness(worker.entry, { concurrency: 1 })
    const shard = writeCorpusShard(join(h.dir, 'corpus.bin'))
    const config = tinyConfig({ steps: 8, checkpoint_every: 1 })
    expect(config.train.on_nonfinite).toBe('pause')
    const init = join(h.dir, 'poisoned')
    const source = new (loadEngineAddon().Engine)(engineConfigJson(config, null))
    source.saveCheckpoint(init)
    plantNaN(join(init, 'model.safetensors'), BAD)
    rmSync(join(init, 'checksums.json'))  // a hand-made checkpoint: no manifest to refuse it

    const id = h.manager.create({ name: 'diverging', config, dataset: { path: shard }, init }).id
    await h.waitForStatus(id, 'paused')
    const paused = h.events(id).find((e) => e.kind === 'paused')!
    expect(paused.message).toMatch(/^diverged at step 1: the loss is NaN and the gradient norm is NaN/)
    expect(paused.message).toContain(`first non-finite: weight ${BAD}`)
    expect(paused.message).toContain('the update was skipped, the weights are unchanged')
    expect(h.store.getRun(id)?.step).toBe(1)

    h.manager.stop(id)
    const failed = await h.waitForStatus(id, 'failed')
    expect(failed.error).toMatch(new RegExp(`checkpoint-1: not saved: parameter '${BAD.replace(/\./g, '\\.')}' holds a NaN`))
    expect(h.store.listCheckpoints(id)).toEqual([])
  }, 120_000)
})
