// Run details, series and plans for Compare's tests, and a fake API client answering from handlers.
import type { RunConfig } from '../../main/api/config'
import { RunConfigSchema } from '../../main/api/config'
import type { Params, Plan, RequestName, Result } from '../../main/api/contract'
import type { ApiClient } from '../../renderer/api'
import type { RunDetail } from '../../renderer/stores/compare'

export const tinyConfig: RunConfig = RunConfigSchema.parse({
  model: { arch: 'mixtral', d_model: 64, n_layers: 2, n_heads: 4, n_experts: 4, top_k: 2 },
  train: { steps: 20, batch_size: 4, seq_len: 32 },
})

export function detailOf(id: string, summary: Partial<RunDetail['summary']> = {}, config: RunConfig = tinyConfig): RunDetail {
  return {
    summary: {
      id, name: id, status: 'finished', createdAt: 0, startedAt: 0, finishedAt: 1000, step: 20, totalSteps: 20,
      lastLoss: 2, tokensPerSec: 100, model: 'mixtral', strategy: 'resident', error: null, ...summary,
    },
    config,
    dataset: { path: '/data/corpus.txt' },
    init: null,
    offload: null,
    events: [],
    checkpoints: [],
  }
}

export function planOf(deviceTotal: number): Plan {
  const tier = (name: 'device' | 'host' | 'ssd', total: number) => ({
    tier: name, params: total / 4, grads: total / 4, optimizer: total / 4, activations: total / 8, buffers: total / 8, total, budget: name === 'ssd' ? null : 8 * 2 ** 30,
  })
  return {
    requested: 'none', mode: 'none', fits: true, tiers: [tier('device', deviceTotal), tier('host', 0), tier('ssd', 0)], paramCount: 1e6,
    expertParamCount: 5e5, expertBytes: 2e5, slots: null, cacheExperts: null, formulas: [], explanation: 'resident',
  }
}

export type FakeHandlers = { [N in RequestName]?: (params: Params<N>) => Promise<Result<N>> | Result<N> }

/** An ApiClient answering from the given handlers; every call is recorded. */
export function fakeClient(handlers: FakeHandlers): ApiClient & { calls: { name: RequestName; params: unknown }[] } {
  const calls: { name: RequestName; params: unknown }[] = []
  return {
    transport: 'socket',
    calls,
    async invoke<N extends RequestName>(name: N, params: Params<N>): Promise<Result<N>> {
      calls.push({ name, params })
      const handler = handlers[name] as ((p: Params<N>) => Promise<Result<N>> | Result<N>) | undefined
      if (!handler) throw new Error(`no fake for ${name}`)
      return handler(params)
    },
    on: () => () => undefined,
    onConnection: () => () => undefined,
    close: () => undefined,
  }
}
