import { describe, expect, it } from 'vitest'

import {
  ApiInputError,
  eventChannel,
  eventNames,
  events,
  parseParams,
  requestChannel,
  requestNames,
  requests,
  type RequestName,
} from '../../main/api/contract'
import { isEventName, isRequestName } from '../../main/api/wire'
import { summary, stepEvent, tinyConfig, tinyWith, validParams } from './contract-fixtures'

function rejectionPaths(name: RequestName, params: unknown): string[] {
  try {
    parseParams(name, params)
  } catch (error) {
    expect(error).toBeInstanceOf(ApiInputError)
    return (error as ApiInputError).issues.map((issue) => issue.path)
  }
  throw new Error(`${name} accepted ${JSON.stringify(params)}`)
}

const spec = validParams['runs.create'].spec

// [request, bad params, the path the rejection must name]
const badInputs: [RequestName, unknown, string][] = [
  ['runs.list', { extra: 1 }, ''],
  ['runs.get', {}, 'id'],
  ['runs.get', { id: 'Not A Run Id' }, 'id'],
  ['runs.get', { id: 'run-1', extra: true }, ''],
  ['runs.create', {}, 'spec'],
  ['runs.create', { spec: { ...spec, config: tinyWith('model', 'top_k', 9) } }, 'spec.config.model.top_k'],
  ['runs.create', { spec: { ...spec, config: tinyWith('model', 'top_k', 0) } }, 'spec.config.model.top_k'],
  ['runs.create', { spec: { ...spec, config: tinyWith('model', 'n_heads', 3) } }, 'spec.config.model.n_heads'],
  ['runs.create', { spec: { ...spec, config: tinyWith('model', 'arch', 'llama') } }, 'spec.config.model.arch'],
  ['runs.create', { spec: { ...spec, config: tinyWith('model', 'hidden', 1) } }, 'spec.config.model'],
  ['runs.create', { spec: { ...spec, config: tinyWith('train', 'seq_len', 512) } }, 'spec.config.train.seq_len'],
  ['runs.create', { spec: { ...spec, config: tinyWith('train', 'lr', -1) } }, 'spec.config.train.lr'],
  ['runs.create', { spec: { ...spec, name: '   ' } }, 'spec.name'],
  ['runs.create', { spec: { ...spec, dataset: {} } }, 'spec.dataset.path'],
  ['runs.create', { spec: { ...spec, dataset: { path: 'a.txt', tokenizer: '' } } }, 'spec.dataset.tokenizer'],
  ['runs.pause', { id: 7 }, 'id'],
  ['runs.resume', { id: '-leading-dash' }, 'id'],
  ['runs.stop', { id: 'x'.repeat(65) }, 'id'],
  ['runs.delete', { id: 'UPPER' }, 'id'],
  ['runs.checkpoint', { id: '' }, 'id'],
  ['metrics.series', { id: 'run-1', metrics: [] }, 'metrics'],
  ['metrics.series', { id: 'run-1', metrics: ['loss', 'bogus'] }, 'metrics.1'],
  ['metrics.series', { id: 'run-1', metrics: ['loss'], maxPoints: 1 }, 'maxPoints'],
  ['metrics.series', { id: 'run-1', metrics: ['loss'], fromStep: -1 }, 'fromStep'],
  ['metrics.totals', { id: 'Run 1' }, 'id'],
  ['datasets.preview', { dataset: { path: 'data.jsonl' } }, 'dataset.path'],
  ['datasets.preview', { dataset: { path: '/d.jsonl' }, records: 500 }, 'records'],
  ['runs.servingHints', { id: 'run-1', vramBytes: 0 }, 'vramBytes'],
  ['checkpoints.exportServingHints', { id: 'run-1', dir: 'relative/dir' }, 'dir'],
  ['runs.servingHints', { id: 'run-1', pinPolicy: 'hottest' }, 'pinPolicy'],
  ['metrics.expertLoad', { id: 'run-1', layer: -1 }, 'layer'],
  ['metrics.expertLoad', { id: 'run-1', layer: 0.5 }, 'layer'],
  ['metrics.expertLoad', { id: 'run-1', layer: 0, maxSteps: 5000 }, 'maxSteps'],
  ['checkpoints.export', { id: 'run-1', dir: '' }, 'dir'],
  ['checkpoints.export', { id: 'run-1', dir: '/tmp/x', modelType: 'llama' }, 'modelType'],
  ['checkpoints.export', { id: 'run-1', dir: '/tmp/x', dtype: 'f16' }, 'dtype'],
  ['presets.list', { all: true }, ''],
  ['config.validate', { config: {}, extra: 1 }, ''],
  ['runs.restart', { id: 'Not An Id' }, 'id'],
  ['metrics.stepLoads', { id: 'run-1', step: 0 }, 'step'],
  ['metrics.placement', { id: 'run-1' }, 'layer'],
  ['metrics.placement', { id: 'run-1', layer: 1.5 }, 'layer'],
  ['metrics.placement', { id: 'run-1', layer: 0, toStep: -1 }, 'toStep'],
  ['metrics.placement', { id: 'run-1', layer: 0, maxPoints: 2001 }, 'maxPoints'],
  ['metrics.placement', { id: 'run-1', layer: 0, step: 3 }, ''],
  ['hardware.probe', { verbose: true }, ''],
  ['planner.plan', { config: tinyWith('model', 'top_k', 0) }, 'config.model.top_k'],
  ['planner.plan', { config: tinyWith('model', 'd_model', 256), deviceBudgetBytes: -1 }, 'deviceBudgetBytes'],
  ['files.list', { dir: '' }, 'dir'],
  ['finetune.measureExperts', { config: tinyConfig, dataset: { path: '/d.txt' }, threshold: 0 }, 'threshold'],
  ['finetune.measureExperts', { config: tinyConfig, dataset: { path: '/d.txt' }, score: 'load' }, 'score'],
  ['finetune.measureExperts', { config: tinyConfig, dataset: { path: 'd.txt' } }, 'dataset.path'],
  ['planner.plan', { config: { ...(tinyConfig as object), finetune: { method: 'lora' } } }, 'config.finetune.lora'],
  ['chat.start', { model: { dir: 'relative/model' }, messages: [{ role: 'user', content: 'Hi' }] }, 'model.dir'],
  ['chat.start', { model: { runId: 'run-1' }, messages: [] }, 'messages'],
  ['chat.start', { model: { runId: 'run-1' }, messages: [{ role: 'user', content: 'Hi' }], sampling: { topP: 0 } }, 'sampling.topP'],
  ['chat.cancel', {}, 'id'],
  ['models.inspect', { dir: 'relative/model' }, 'dir'],
  ['models.export', { dir: '/tmp/model', to: 'relative/out' }, 'to'],
  ['models.export', { dir: '/tmp/model', to: '/tmp/out', expertLayout: 'stacked' }, 'expertLayout'],
]

describe('request params', () => {
  it('has a valid sample for every request and nothing else', () => {
    expect(Object.keys(validParams).sort()).toEqual([...requestNames].sort())
  })

  it.each(requestNames)('accepts a valid %s', (name) => {
    expect(() => parseParams(name, validParams[name])).not.toThrow()
  })

  it('covers every request with at least one bad input', () => {
    expect(new Set(badInputs.map(([name]) => name))).toEqual(new Set(requestNames))
  })

  it.each(badInputs)('rejects bad %s params %j at %s', (name, params, path) => {
    expect(rejectionPaths(name, params)).toContain(path)
  })

  it('applies the contract defaults', () => {
    const parsed = parseParams('metrics.series', { id: 'run-1', metrics: ['loss'] })
    expect(parsed.maxPoints).toBe(2000)
    const exported = parseParams('checkpoints.export', { id: 'run-1', dir: '/tmp/x' })
    expect(exported).toMatchObject({ modelType: 'mixtral', dtype: 'f32' })
    const created = parseParams('runs.create', validParams['runs.create'])
    expect(created.spec.config.model.moe_every).toBe(1)
  })

  it('treats missing params as empty', () => {
    expect(parseParams('runs.list', undefined)).toEqual({})
    expect(rejectionPaths('runs.get', undefined)).toEqual(['id'])
  })

  it('rejects unknown requests', () => {
    expect(() => parseParams('runs.explode' as RequestName, {})).toThrow(ApiInputError)
    expect(isRequestName('runs.explode')).toBe(false)
    // Inherited object properties are not requests.
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) expect(isRequestName(name)).toBe(false)
    expect(isRequestName(42)).toBe(false)
    expect(requestNames.every(isRequestName)).toBe(true)
  })

  it('takes paths absolute only, naming the field', () => {
    const pathsOf = (name: RequestName, params: unknown) => {
      try {
        parseParams(name, params)
        return []
      } catch (error) {
        return (error as ApiInputError).issues.map((issue) => `${issue.path}: ${issue.message}`)
      }
    }
    const relative = /must be an absolute path/
    expect(pathsOf('files.list', { dir: 'relative-dir' })).toEqual([expect.stringMatching(/^dir: must be an absolute path/)])
    expect(pathsOf('files.list', { dir: '/tmp' })).toEqual([])
    expect(pathsOf('files.list', { dir: 'C:\\data' })).toEqual([])
    expect(pathsOf('checkpoints.export', { id: 'r1', dir: 'relative-exp' })).toEqual([expect.stringMatching(/^dir: /)])
    expect(pathsOf('checkpoints.export', { id: 'r1', dir: '/tmp/exp' })).toEqual([])
    const withDataset = (dataset: object, init?: string) => ({ spec: { ...spec, dataset, ...(init ? { init } : {}) } })
    expect(pathsOf('runs.create', withDataset({ path: 'corpus.txt' }))).toEqual([expect.stringMatching(/^spec\.dataset\.path: /)])
    expect(pathsOf('runs.create', withDataset({ path: '/d/corpus.txt', tokenizer: './tokenizer.json' }))[0]).toMatch(relative)
    expect(pathsOf('runs.create', withDataset({ path: '/d/corpus.txt' }, 'ckpt'))[0]).toMatch(/^spec\.init: must be an absolute path/)
  })

  it('refuses AdamW eps 0 (it turns any zero gradient into NaN)', () => {
    expect(() => parseParams('runs.create', { spec: { ...spec, config: tinyWith('train', 'eps', 0) } })).toThrow(/spec\.config\.train\.eps: /)
    expect(() => parseParams('runs.create', { spec: { ...spec, config: tinyWith('train', 'eps', 1e-12) } })).not.toThrow()
  })

  it('messages name the method and the field', () => {
    try {
      parseParams('runs.create', { spec: { ...spec, config: tinyWith('model', 'top_k', 9) } })
      expect.unreachable()
    } catch (error) {
      expect((error as Error).message).toMatch(/^runs\.create: spec\.config\.model\.top_k: /)
    }
  })
})

describe('result schemas', () => {
  const malformed: [RequestName, unknown][] = [
    ['runs.list', [{ ...summary(), status: 'exploded' }]],
    ['runs.list', [{ ...summary(), step: 1.5 }]],
    ['runs.list', { runs: [] }],
    ['runs.get', { summary: summary() }],
    ['runs.create', { ...summary(), id: undefined }],
    ['runs.pause', { ok: false }],
    ['runs.stop', {}],
    ['metrics.series', { step: [1], wallTime: [1], values: { loss: ['x'] } }],
    ['checkpoints.exportServingHints', { dir: 1, files: [] }],
    ['runs.servingHints', { range: { fromStep: 1, toStep: 2 }, sglang: { logical_count: 'all' } }],
    ['datasets.preview', { template: null, records: [{ line: 1 }] }],
    ['metrics.totals', { steps: 1, peakBytes: { device: -1, host: null, ssd: null }, bytesMoved: null, offloadBytes: null, placementBytes: null }],
    ['metrics.expertLoad', { layer: 0, experts: 2, steps: [1], counts: 'many' }],
    ['metrics.stepLoads', { step: 1, layers: [{ tokens: [1], placement: null, tiers: null, pins: null, spilled: null }] }],
    ['metrics.placement', { layer: 0, steps: [1.5], imbalanceBefore: [1], imbalanceAfter: [1], spilledTokens: [0], movedExperts: [0] }],
    ['checkpoints.export', { directory: '/tmp' }],
    ['presets.list', [{ name: 'tiny' }]],
    ['config.validate', { ok: 'yes', issues: [] }],
  ]

  it.each(malformed)('rejects a malformed %s result %j', (name, result) => {
    expect(requests[name].result.safeParse(result).success).toBe(false)
  })

  it('accepts well-formed results', () => {
    expect(requests['runs.list'].result.safeParse([summary()]).success).toBe(true)
    expect(requests['runs.pause'].result.safeParse({ ok: true }).success).toBe(true)
  })

  it('rejects non-finite numbers, which JSON cannot carry', () => {
    expect(requests['runs.list'].result.safeParse([summary({ lastLoss: Number.NaN })]).success).toBe(false)
    expect(requests['runs.list'].result.safeParse([summary({ tokensPerSec: Infinity })]).success).toBe(false)
  })
})

describe('events', () => {
  it('accepts well-formed payloads and rejects malformed ones', () => {
    expect(events['run.status'].safeParse(summary()).success).toBe(true)
    expect(events['run.step'].safeParse(stepEvent('run-1', 3, 2.5)).success).toBe(true)
    expect(events['run.step'].safeParse({ id: 'run-1', metrics: {} }).success).toBe(false)
    expect(events['run.event'].safeParse({ runId: 'run-1', at: 1, kind: 'exploded', message: '' }).success).toBe(false)
  })

  it('recognises only contract event names', () => {
    expect(eventNames.every(isEventName)).toBe(true)
    expect(isEventName('run.explode')).toBe(false)
    expect(isEventName('constructor')).toBe(false)
  })
})

describe('channel names', () => {
  it('derive from the contract keys', () => {
    expect(requestNames).toEqual(Object.keys(requests))
    expect(eventNames).toEqual(Object.keys(events))
    for (const name of requestNames) expect(requestChannel(name)).toBe(`api:${name}`)
    for (const name of eventNames) expect(eventChannel(name)).toBe(`event:${name}`)
  })

  it('are distinct across requests and events', () => {
    const channels = [...requestNames.map(requestChannel), ...eventNames.map(eventChannel)]
    expect(new Set(channels).size).toBe(channels.length)
  })
})
