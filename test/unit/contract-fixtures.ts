// Valid samples for every request and a fake host, shared by the contract, IPC, server and client
// tests. `validParams` is keyed by RequestName, so a request added to the contract without a sample
// here fails to type-check.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

import { RunConfigSchema } from '../../main/api/config'
import type { ApiHandlers, EventName, EventPayload, EventSink, Params, RequestName, RunSummary } from '../../main/api/contract'

/** The bundled corpus, absolute (the contract takes absolute paths only). */
export const corpusPath = fileURLToPath(new URL('../../resources/corpus/python-tutorial.txt', import.meta.url))

export const tinyConfig: unknown = JSON.parse(readFileSync(new URL('../../resources/presets/tiny.json', import.meta.url), 'utf8'))

export const validParams: { [N in RequestName]: Params<N> } = {
  'runs.list': {},
  'runs.get': { id: 'run-1' },
  'runs.create': {
    spec: {
      name: 'tiny demo',
      config: tinyConfig as Params<'runs.create'>['spec']['config'],
      dataset: { path: corpusPath },
    },
  },
  'runs.pause': { id: 'run-1' },
  'runs.resume': { id: 'run-1' },
  'runs.stop': { id: 'run-1' },
  'runs.delete': { id: 'run-1' },
  'runs.checkpoint': { id: 'run-1' },
  'runs.restart': { id: 'run-1' },
  'finetune.measureExperts': {
    config: tinyConfig as Params<'finetune.measureExperts'>['config'],
    dataset: { path: corpusPath },
    batches: 2,
    threshold: 0.8,
    score: 'tokens',
  },
  'metrics.series': { id: 'run-1', metrics: ['loss', 'lr'] },
  'metrics.totals': { id: 'run-1' },
  'datasets.preview': { dataset: { path: '/tmp/data.jsonl' } },
  'runs.servingHints': { id: 'run-1' },
  'checkpoints.exportServingHints': { id: 'run-1', dir: '/tmp/hints' },
  'metrics.expertLoad': { id: 'run-1', layer: 0 },
  'metrics.stepLoads': { id: 'run-1', step: 1 },
  'metrics.placement': { id: 'run-1', layer: 0 },
  'checkpoints.export': { id: 'run-1', dir: '/tmp/export' },
  'models.inspect': { dir: '/tmp/model' },
  'models.export': { dir: '/tmp/model', to: '/tmp/model-bf16' },
  'presets.list': {},
  'hardware.probe': {},
  'planner.plan': { config: tinyConfig as Params<'planner.plan'>['config'] },
  'files.list': { dir: '/tmp' },
  'config.validate': { config: { model: { arch: 'mixtral' } } },
  'chat.start': { model: { runId: 'run-1', checkpoint: 'base' }, messages: [{ role: 'user', content: 'Hi' }], sampling: { temperature: 0.7, topP: 0.9 } },
  'chat.cancel': { id: 'chat-1' },
}

// A copy of the tiny preset with one field changed, for "bad field" cases.
export function tinyWith(section: 'model' | 'train', field: string, value: unknown): unknown {
  const config = structuredClone(tinyConfig) as Record<string, Record<string, unknown>>
  config[section]![field] = value
  return config
}

export function summary(overrides: Partial<RunSummary> = {}): RunSummary {
  return {
    id: 'run-1',
    name: 'tiny demo',
    status: 'running',
    createdAt: 1_700_000_000_000,
    startedAt: 1_700_000_001_000,
    finishedAt: null,
    step: 10,
    totalSteps: 300,
    lastLoss: 4.25,
    tokensPerSec: 12_345,
    model: 'mixtral L4 d256 8x top-2',
    strategy: 'resident',
    error: null,
    ...overrides,
  }
}

export function stepEvent(id: string, step: number, loss: number): EventPayload<'run.step'> {
  return {
    id,
    metrics: {
      step,
      wallTime: 1_700_000_002_000 + step,
      loss,
      aux_loss: 0.01,
      lr: 1e-3,
      grad_norm: 0.5,
      tokens: 2048,
      tokens_per_s: 20_000,
      step_ms: 100,
      forward_ms: 40,
      backward_ms: 50,
      optimizer_ms: 10,
      eval_loss: null,
    },
    expertTokens: [[512, 512, 256, 256, 128, 128, 128, 128]],
  }
}

const ok = async () => ({ ok: true as const })

// A host whose handlers answer with valid results and record the params they were given.
export function fakeHandlers(overrides: Partial<ApiHandlers> = {}): ApiHandlers & { calls: { name: RequestName; params: unknown }[] } {
  const calls: { name: RequestName; params: unknown }[] = []
  const base: ApiHandlers = {
    'runs.list': async () => [summary()],
    'runs.get': async ({ id }) => ({
      summary: summary({ id }),
      config: RunConfigSchema.parse(tinyConfig),
      dataset: { path: corpusPath },
      init: null,
      offload: null,
      events: [],
      checkpoints: [],
    }),
    'runs.create': async ({ spec }) => summary({ name: spec.name, status: 'queued', step: 0, lastLoss: null }),
    'runs.pause': ok,
    'runs.resume': ok,
    'runs.stop': ok,
    'runs.delete': ok,
    'runs.checkpoint': ok,
    'runs.restart': async ({ id }) => summary({ id, status: 'queued' }),
    'metrics.series': async ({ metrics }) => ({
      step: [1, 2],
      wallTime: [10, 20],
      values: Object.fromEntries(metrics.map((m) => [m, [1, 2]])),
    }),
    'checkpoints.exportServingHints': async ({ dir }) => ({
      dir,
      files: ['expert-location.json'],
      hints: {
        range: { fromStep: 1, toStep: 1 },
        sglang: { logical_count: [[1]] },
        llamaCpp: { gpuLayers: [], gpuBytes: 0, trafficOnGpu: 0, args: '-ngl 999' },
        hotExperts: { policy: 'sum', pinSlots: 0, layers: [] },
        usage: { sglang: 's', llamaCpp: 'l', hotExperts: 'h' },
      },
    }),
    'runs.servingHints': async () => ({
      range: { fromStep: 1, toStep: 2 },
      sglang: { logical_count: [[3, 5]] },
      llamaCpp: { gpuLayers: [0], gpuBytes: 10, trafficOnGpu: 1, args: '-ngl 999' },
      hotExperts: { policy: 'previous', pinSlots: 1, layers: [{ layer: 0, experts: [1], share: 0.625 }] },
      usage: { sglang: 's', llamaCpp: 'l', hotExperts: 'h' },
    }),
    'datasets.preview': async () => ({
      template: null,
      records: [{ line: 1, format: 'pair', tokens: 3, overLength: false, segments: [{ text: 'a', trained: false, tokens: 1 }, { text: 'b', trained: true, tokens: 2 }] }],
    }),
    'metrics.totals': async () => ({
      steps: 2, peakBytes: { device: 1024, host: 4096, ssd: null }, bytesMoved: 512, offloadBytes: 512, placementBytes: null,
    }),
    'metrics.expertLoad': async ({ layer }) => ({ layer, experts: 2, steps: [1], counts: [3, 5], bias: null }),
    'metrics.stepLoads': async ({ step }) => ({
      step,
      layers: [{ tokens: [3, 5], placement: null, tiers: null, pins: null, spilled: null, selectionBias: null, devices: null }],
      devicePeakBytes: null,
    }),
    'metrics.placement': async ({ layer }) => ({
      layer, steps: [1], imbalanceBefore: [1.5], imbalanceAfter: [1.1], spilledTokens: [40], movedExperts: [1],
      criticalMs: [12.5], predictedMs: [null],
    }),
    'checkpoints.export': async ({ dir }) => ({ dir }),
    'finetune.measureExperts': async ({ threshold, score }) => ({
      layers: [0, 1], gate: [[0.5, 0.5], [0.9, 0.1]], tokens: [[0.5, 0.5], [0.75, 0.25]], batches: 2, tokensSeen: 128,
      threshold: threshold ?? 0.9, score: score ?? 'gate', experts: { 0: [0, 1], 1: [0] },
    }),
    'models.export': async ({ to }) => ({ dir: to }),
    'models.inspect': async ({ dir }) => ({
      dir,
      modelType: 'qwen3_moe',
      label: 'Qwen3-MoE',
      architecture: 'Qwen3MoeForCausalLM',
      supported: true,
      problems: [],
      notes: [],
      model: null,
      shape: null,
      weights: { format: 'single', complete: true, shards: [], dtypes: { BF16: 1 }, bytes: 2, tensors: 1, expectedTensors: 1, expertLayout: 'per-expert' },
      tokenizer: { tokenizerJson: true, tokenizerConfig: true, chatTemplate: 'tokenizer_config.json' },
    }),
    'presets.list': async () => [],
    'hardware.probe': async () => ({
      cpuModel: 'test cpu',
      cpus: 2,
      cpuFeatures: ['avx2'],
      memoryBytes: 2 ** 34,
      freeMemoryBytes: 2 ** 33,
      disks: [],
      gpus: [],
      backends: ['cpu'],
      engineBackends: [{ name: 'cpu', usable: true, whyNot: '', kernels: 'sgemm avx2, bf16 gemm portable', bf16Native: false }],
      engineError: null,
    }),
    'planner.plan': async () => ({
      requested: 'none',
      mode: 'none',
      fits: true,
      tiers: [],
      paramCount: 1,
      expertParamCount: 0,
      expertBytes: 0,
      slots: null,
      cacheExperts: null,
      formulas: [],
      explanation: 'resident',
    }),
    'files.list': async ({ dir }) => ({ dir: dir ?? '/', parent: null, entries: [] }),
    'config.validate': async () => ({ ok: true, issues: [] }),
    'chat.start': async () => ({ id: 'chat-1', modelDir: '/m', label: 'm', promptTokens: 3, template: null, stopTokens: [] }),
    'chat.cancel': async () => ({ ok: true }) as const,
    ...overrides,
  }
  const recorded = Object.fromEntries(
    Object.entries(base).map(([name, handler]) => [
      name,
      (params: unknown) => {
        calls.push({ name: name as RequestName, params })
        return (handler as (p: unknown) => Promise<unknown>)(params)
      },
    ]),
  ) as ApiHandlers
  return Object.assign(recorded, { calls })
}

// The host's event side: tests emit, transports listen.
export function eventHub(): { onEvent: (listener: EventSink) => () => void; emit: <E extends EventName>(name: E, payload: EventPayload<E>) => void; listeners: () => number } {
  const listeners = new Set<EventSink>()
  return {
    onEvent(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    emit(name, payload) {
      for (const listener of listeners) listener(name, payload)
    },
    listeners: () => listeners.size,
  }
}
