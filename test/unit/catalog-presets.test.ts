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

  it('rejects an invalid preset naming the file and field', () => {
    writeFileSync(join(dir, 'broken.json'), JSON.stringify({ model: { arch: 'mixtral', d_model: 10, n_heads: 3 }, train: {} }))
    expect(() => listPresets(dir)).toThrow(/broken\.json: model\.n_heads: must divide d_model \(10\)/)
  })

  it('finds the bundled corpus', () => {
    expect(bundledCorpus()).toMatch(/resources\/corpus\/python-tutorial\.txt$/)
  })
})
