// Serving hints from recorded expert loads, on hand-made loads whose answers are worked out by hand.
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { ServingHintsParamsSchema } from '../../main/api/contract'
import { servingHints } from '../../main/host/serving/gather'
import { hotExperts, llamaCppOverride, sglangExpertLocation, type HintInput } from '../../main/host/serving/hints'
import { writeServingHints } from '../../main/host/serving/write'
import type { TelemetryStore } from '../../main/host/store/store'
import { LAYER_EXPERTS, stepRecords, tempDir, tokensAt, wallTimeOf, withStoreRun } from './store-fixtures'

// 4 model layers, layer 0 dense; MoE layers 1..3 with 3 experts, two steps each. Layer 3's experts are half
// the bytes of the others (a pyramid), and layer 2 drops tokens (less traffic).
const input: HintInput = {
  nLayers: 4,
  layers: [
    { layer: 1, steps: [[4, 2, 0], [6, 0, 2]], expertBytes: 100 },
    { layer: 2, steps: [[1, 1, 1], [2, 0, 1]], expertBytes: 100 },
    { layer: 3, steps: [[0, 8, 0], [1, 6, 1]], expertBytes: 50 },
  ],
}

describe('serving hints', () => {
  it('sums tokens per expert for SGLang, one row per model layer, the dense layer zero', () => {
    expect(sglangExpertLocation(input)).toEqual({ logical_count: [[0, 0, 0], [10, 2, 2], [3, 1, 2], [1, 14, 1]] })
  })

  it('keeps the layers serving the most traffic per byte on the GPU within the budget', () => {
    // traffic: 14, 6, 16 over 100, 100, 50 bytes; total 36
    const fit = llamaCppOverride(input, 160)
    expect(fit).toMatchObject({ gpuLayers: [1, 3], gpuBytes: 150 })
    expect(fit.trafficOnGpu).toBeCloseTo(30 / 36, 12)
    expect(fit.args).toBe('-ngl 999 -ot "blk\\.(1|3)\\.ffn_(gate|up|down)_exps\\.=CUDA0" -ot "ffn_(gate|up|down)_exps\\.=CPU"')
    expect(llamaCppOverride(input, 40)).toMatchObject({ gpuLayers: [], gpuBytes: 0, trafficOnGpu: 0, args: '-ngl 999 -ot "ffn_(gate|up|down)_exps\\.=CPU"' })
    expect(llamaCppOverride(input, 1000).trafficOnGpu).toBe(1)
  })

  it('pins what the engine’s pinning would: the top scores over all layers, by its policy', () => {
    // previous (last step): 6@(1,0) 6@(3,1) 2@(1,2) 2@(2,0) ... -> top 3: (1,0) (3,1) then (1,2) before (2,0)
    const previous = hotExperts(input, 3, 'previous')
    expect(previous.layers.map((l) => l.experts)).toEqual([[0, 2], [], [1]])
    expect(previous.layers[0]!.share).toBeCloseTo(12 / 14, 12)
    expect(previous.layers[2]!.share).toBeCloseTo(14 / 16, 12)
    // ema (weight 0.5): layer 3 expert 1 = 0.5·6 + 0.25·8 = 5 beats layer 1 expert 0 = 0.5·6 + 0.25·4 = 4
    expect(hotExperts(input, 1, 'ema').layers.map((l) => l.experts)).toEqual([[], [], [1]])
    // sum: 14@(3,1) > 10@(1,0)
    expect(hotExperts(input, 2, 'sum').layers.map((l) => l.experts)).toEqual([[0], [], [1]])
    expect(hotExperts(input, 0, 'sum').layers.every((l) => l.experts.length === 0)).toBe(true)
  })
})

describe('serving hints of a recorded run', () => {
  let opened: { store: TelemetryStore; path: string }
  withStoreRun((o) => (opened = o))

  it('sums the recorded loads over the last steps, with the model layers and the run’s pinning', async () => {
    const { store } = opened
    store.appendSteps('r1', stepRecords(1, 10), Array.from({ length: 10 }, (_, i) => wallTimeOf(i + 1)))
    store.updateRun('r1', { step: 10 })
    const hints = servingHints(store, ServingHintsParamsSchema.parse({ id: 'r1', lastSteps: 4, vramBytes: 2 ** 40 }))
    expect(hints.range).toEqual({ fromStep: 7, toStep: 10 })
    const sum = (l: number, e: number) => [7, 8, 9, 10].reduce((a, s) => a + tokensAt(s, l, e), 0)
    expect(hints.sglang.logical_count).toEqual(LAYER_EXPERTS.map((n, l) => Array.from({ length: n }, (_, e) => sum(l, e))))
    expect(hints.llamaCpp).toMatchObject({ gpuLayers: [0, 1, 2, 3], trafficOnGpu: 1 })
    // A resident run has no pinning of its own: the top experts by their summed tokens, top_k per MoE layer.
    expect(hints.hotExperts.policy).toBe('sum')
    expect(hints.hotExperts.pinSlots).toBe(8)

    const dir = join(tempDir().dir, 'hints')
    const written = await writeServingHints(dir, 'r1', hints)
    expect(readdirSync(dir).sort()).toEqual(['README.txt', 'expert-location.json', 'hot-experts.json', 'llama-cpp-args.txt'])
    expect(JSON.parse(readFileSync(join(dir, 'expert-location.json'), 'utf8'))).toEqual(hints.sglang)
    expect(written.files).toHaveLength(4)
    await expect(writeServingHints(dir, 'r1', hints)).rejects.toThrow(/already exists and is not empty/)
  })

  it('names the range that cannot be used', () => {
    const { store } = opened
    expect(() => servingHints(store, ServingHintsParamsSchema.parse({ id: 'r1' }))).toThrow('run r1: no step is recorded yet')
    expect(() => servingHints(store, ServingHintsParamsSchema.parse({ id: 'ghost' }))).toThrow('no run "ghost"')
  })
})
