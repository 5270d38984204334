import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { bundledCorpus, listPresets, resourcesDir } from '../../main/host/catalog'

const dir = mkdtempSync(join(tmpdir(), 'moe-presets-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('presets', () => {
  it('lists every bundled preset, valid, described, tiny first', () => {
    const presets = listPresets()
    const files = readdirSync(join(resourcesDir(), 'presets')).filter((f) => f.endsWith('.json'))
    expect(presets.map((p) => `${p.name}.json`).sort()).toEqual(files.sort())
    expect(presets[0]!.name).toBe('tiny')
    for (const p of presets) {
      expect(RunConfigSchema.safeParse(p.config).success).toBe(true)
      expect(p.description).not.toMatch(/^Preset /)
    }
    // Defaults are filled in: the preset says nothing of grad_accum.
    expect(presets[0]!.config.train.grad_accum).toBe(1)
  })

  it('has the real shapes of OLMoE-1B-7B and Qwen3-30B-A3B, q/k norms included', () => {
    const model = (name: string) => listPresets().find((p) => p.name === name)!.config.model
    expect(model('olmoe-1b-7b')).toMatchObject({
      d_model: 2048, n_layers: 16, n_heads: 16, n_kv_heads: 16, n_experts: 64, top_k: 8, expert_d_ff: 1024,
      vocab_size: 50304, rope_theta: 10000, norm_eps: 1e-5, renormalize: false, qk_norm: 'projection', clip_qkv: null,
    })
    expect(model('qwen3-30b-a3b')).toMatchObject({
      d_model: 2048, n_layers: 48, n_heads: 32, n_kv_heads: 4, head_dim: 128, n_experts: 128, top_k: 8,
      expert_d_ff: 768, vocab_size: 151936, rope_theta: 1e6, norm_eps: 1e-6, renormalize: true, qk_norm: 'head',
    })
  })

  it('rejects an invalid preset naming the file and field', () => {
    writeFileSync(join(dir, 'broken.json'), JSON.stringify({ model: { arch: 'mixtral', d_model: 10, n_heads: 3 }, train: {} }))
    expect(() => listPresets(dir)).toThrow(/broken\.json: model\.n_heads: must divide d_model \(10\)/)
  })

  it('finds the bundled corpus', () => {
    expect(bundledCorpus()).toMatch(/resources\/corpus\/python-tutorial\.txt$/)
  })
})
