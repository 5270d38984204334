// The typed API's requests, implemented over the run manager, the telemetry store, the catalog and
// the exporter. Params arrive already parsed against the contract by the transport.
import { dirname, resolve } from 'node:path'

import type { ApiHandlers, Checkpoint, DevicePlacement, ExpertShares, ParsedParams, RunSpec, RunSummary } from '../api/contract'
import { issuesOf } from '../api/contract'
import { RunConfigSchema } from '../api/config'
import { listPresets } from './catalog'
import { exportCheckpoint, folderModelType } from './export-checkpoint'
import { dataLayout } from './data-dir'
import { prepareDataset } from './datasets/prepare'
import type { ChatSessions } from './generate/chat-sessions'
import { listDirectory } from './files'
import { measureExperts } from './measure-experts'
import { adapterBase, onBase } from './models/adapter-folder'
import { inspectModel } from './models/inspect'
import { probeHardware } from './hardware'
import { planRun } from './planner/plan'
import { finetuneCounts } from './planner/finetune-plan'
import { budgetsOf } from './planner/resolve'
import { previewDataset } from './datasets/preview'
import { checkRunInputs } from './run-inputs'
import { servingHints } from './serving/gather'
import { writeServingHints } from './serving/write'
import { toRunSummary } from './run-summary'
import type { LayerDevices, RunRecord, TelemetryStore } from './store/store'

// What the handlers need of the RunManager; a structural type keeps tests free to pass a fake.
export interface RunControl {
  create(spec: RunSpec): RunSummary | Promise<RunSummary>
  pause(id: string): unknown
  resume(id: string): unknown
  stop(id: string): unknown
  delete(id: string): unknown
  requestCheckpoint(id: string): unknown
  restart(id: string): RunSummary
}

export interface HandlerDeps {
  store: TelemetryStore
  runs: RunControl
  dataDir: string
  /** ESFT's measurement; default: the dataset prepared in the data directory's cache, the engine on a worker. */
  measure?: (params: ParsedParams<'finetune.measureExperts'>) => Promise<ExpertShares>
  /** Try-it generations; absent: chat requests are refused. */
  chats?: ChatSessions
}

const OK = { ok: true } as const

// Runs outlive the working directory of whoever created them (a CLI in one folder, the app in another).
function withAbsolutePaths(spec: RunSpec): RunSpec {
  const { path, tokenizer, eval: held } = spec.dataset
  return {
    ...spec,
    dataset: {
      ...spec.dataset,
      path: resolve(path),
      ...(tokenizer === undefined ? {} : { tokenizer: resolve(tokenizer) }),
      ...(held && 'path' in held ? { eval: { path: resolve(held.path) } } : {}),
    },
    ...(spec.init === undefined ? {} : { init: resolve(spec.init) }),
  }
}

function trainedParameters(config: RunSpec['config']): { trainable: number; adapters: number; total: number } {
  const c = finetuneCounts(config)
  return { trainable: c.trainable, adapters: c.adapters, total: c.base }
}

function requireRun(store: TelemetryStore, id: string): RunRecord {
  const run = store.getRun(id)
  if (!run) throw new Error(`no run "${id}"`)
  return run
}

// The checkpoint at `step`, or the latest; the error lists what there is to choose from.
export function pickCheckpoint(store: TelemetryStore, id: string, step?: number): Checkpoint {
  const checkpoints = store.listCheckpoints(id)
  if (checkpoints.length === 0) throw new Error(`run "${id}" has no checkpoint yet`)
  if (step === undefined) return checkpoints[checkpoints.length - 1]!
  const found = checkpoints.find((c) => c.step === step)
  if (!found) throw new Error(`run "${id}" has no checkpoint at step ${step} (it has steps ${checkpoints.map((c) => c.step).join(', ')})`)
  return found
}

function devicesOf(d: LayerDevices | undefined): DevicePlacement | null {
  if (!d) return null
  const x = d.execution
  return {
    ...d,
    loadBefore: Array.from(d.loadBefore),
    loadAfter: Array.from(d.loadAfter),
    execution: x ? { ...x, deviceBusyMs: Array.from(x.deviceBusyMs) } : null,
  }
}

export function createHandlers({ store, runs, dataDir, measure, chats }: HandlerDeps): ApiHandlers {
  const requireChats = (): ChatSessions => {
    if (!chats) throw new Error('this host does not generate (no chat sessions)')
    return chats
  }
  const control = async (id: string, action: (id: string) => unknown) => {
    requireRun(store, id)
    await action(id)
    return OK
  }
  return {
    'runs.list': async () => store.listRuns().map(toRunSummary),
    'runs.get': async ({ id }) => {
      const run = requireRun(store, id)
      return {
        summary: toRunSummary(run),
        config: run.config,
        dataset: run.dataset,
        init: run.init,
        offload: run.offload,
        expertShares: run.expertShares ?? null,
        parameters: trainedParameters(run.config),
        events: store.listEvents(id),
        checkpoints: store.listCheckpoints(id),
      }
    },
    'runs.create': async ({ spec }) => {
      const absolute = withAbsolutePaths(spec)
      await checkRunInputs(absolute)
      return runs.create(absolute)
    },
    'runs.pause': async ({ id }) => control(id, (i) => runs.pause(i)),
    'runs.resume': async ({ id }) => control(id, (i) => runs.resume(i)),
    'runs.stop': async ({ id }) => control(id, (i) => runs.stop(i)),
    'runs.delete': async ({ id }) => control(id, (i) => runs.delete(i)),
    'runs.checkpoint': async ({ id }) => control(id, (i) => runs.requestCheckpoint(i)),
    'runs.restart': async ({ id }) => {
      requireRun(store, id)
      return runs.restart(id)
    },
    'metrics.series': async ({ id, metrics, fromStep, toStep, maxPoints }) => {
      requireRun(store, id)
      const series = store.series(id, metrics, { fromStep, toStep, maxPoints })
      const finiteOrNull = (v: number | null) => (v !== null && Number.isFinite(v) ? v : null)
      return { ...series, values: Object.fromEntries(Object.entries(series.values).map(([k, vs]) => [k, vs.map(finiteOrNull)])) }
    },
    'metrics.totals': async ({ id }) => store.totals(id),
    'datasets.preview': async ({ dataset, records, seqLen }) => previewDataset(dataset, records, seqLen),
    'runs.servingHints': async (params) => servingHints(store, params),
    'checkpoints.exportServingHints': async ({ dir, ...params }) => writeServingHints(dir, params.id, servingHints(store, params)),
    'metrics.expertLoad': async ({ id, layer, fromStep, toStep, maxSteps }) => {
      requireRun(store, id)
      return store.expertLoad(id, layer, { fromStep, toStep, maxSteps })
    },
    'metrics.stepLoads': async ({ id, step }) => {
      requireRun(store, id)
      const loads = store.stepLoads(id, step)
      if (!loads) throw new Error(`run "${id}" has no expert loads recorded at step ${step}`)
      const layer = (arrays: ArrayLike<number>[] | null, l: number) => (arrays?.[l] ? Array.from(arrays[l]!) : null)
      return {
        step,
        layers: loads.tokens.map((tokens, l) => ({
          tokens: Array.from(tokens),
          placement: layer(loads.placement, l),
          tiers: layer(loads.tiers, l),
          pins: layer(loads.pins, l),
          spilled: layer(loads.spilledTokens, l),
          selectionBias: layer(loads.selectionBias, l),
          devices: devicesOf(loads.devices?.[l]),
        })),
        devicePeakBytes: loads.devicePeakBytes ? Array.from(loads.devicePeakBytes) : null,
      }
    },
    'metrics.placement': async ({ id, layer, fromStep, toStep, maxPoints }) => {
      requireRun(store, id)
      return store.placementSeries(id, layer, { fromStep, toStep, maxPoints })
    },
    'checkpoints.export': async ({ id, step, dir, modelType, dtype, expertLayout, format }) => {
      const run = requireRun(store, id)
      const checkpoint = pickCheckpoint(store, id, step)
      return {
        dir: await exportCheckpoint({
          checkpointDir: checkpoint.path, outDir: dir, modelType, bf16: dtype === 'bf16', expertLayout, format,
          // The adapter names the folder the run started from, where PEFT and Try it find its base.
          ...(format === 'adapter' && run.init ? { baseDir: run.init } : {}),
          companionsFrom: [run.init, run.dataset.tokenizer ? dirname(run.dataset.tokenizer) : undefined].filter(
            (d): d is string => d !== undefined && d !== null),
        }),
      }
    },
    'finetune.measureExperts': async (params) => {
      const absolute = { ...params, dataset: withAbsolutePaths({ dataset: params.dataset } as RunSpec).dataset,
        ...(params.init === undefined ? {} : { init: resolve(params.init) }) }
      if (measure) return measure(absolute)
      return measureExperts(absolute, { prepare: prepareDataset, cacheDir: dataLayout(dataDir).cacheDir })
    },
    'models.inspect': async ({ dir }) => inspectModel(dir),
    'models.export': async ({ dir, base, to, modelType, dtype, expertLayout }) => {
      // A PEFT adapter folder merges into its base, whose model_type is the default.
      const baseDir = onBase(dir, base) ? adapterBase(dir, base) : undefined
      return {
        dir: await exportCheckpoint({
          checkpointDir: dir, outDir: to, modelType: modelType ?? (await folderModelType(baseDir ?? dir)), bf16: dtype === 'bf16',
          expertLayout, ...(baseDir ? { baseDir } : {}), companionsFrom: baseDir ? [dir, baseDir] : [dir],
        }),
      }
    },
    'presets.list': async () => listPresets(),
    'hardware.probe': async () => probeHardware(dataDir),
    'planner.plan': async ({ config, deviceBudgetBytes, hostBudgetBytes, frozenBf16 }) => {
      const machine = budgetsOf(probeHardware(dataDir))
      return planRun(config, { ...machine, device: deviceBudgetBytes ?? machine.device, host: hostBudgetBytes ?? machine.host }, { frozenBf16 })
    },
    'files.list': async ({ dir }) => listDirectory(dir),
    'config.validate': async ({ config }) => {
      const parsed = RunConfigSchema.safeParse(config)
      return parsed.success ? { ok: true, issues: [] } : { ok: false, issues: issuesOf(parsed.error) }
    },
    'chat.start': async (params) => requireChats().start(params),
    'chat.cancel': async ({ id }) => {
      requireChats().cancel(id)
      return OK
    },
  }
}
