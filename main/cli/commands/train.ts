// `moe-workbench train`: creates a run through the host (so it lands in the same database the UI
// reads) and follows it to the end.
import { resolve } from 'node:path'

import type { RunSpec, RunSummary } from '../../api/contract'
import { bundledCorpus } from '../../host/catalog'
import { dataLayout } from '../../host/data-dir'
import { prepareDataset } from '../../host/datasets'
import { integerOption, parseCommandArgs, requireOption } from '../args'
import type { CliContext } from '../context'
import { RunFollower } from '../follow-run'
import { formatLoss, formatRate } from '../format'
import { loadRunConfig } from '../run-config'
import type { Host } from '../../host/host'

const OPTIONS = {
  config: { type: 'string' },
  data: { type: 'string' },
  tokenizer: { type: 'string' },
  name: { type: 'string' },
  steps: { type: 'string' },
  init: { type: 'string' },
} as const

export function trainSpec(argv: string[]): RunSpec {
  const { values } = parseCommandArgs('train', argv, OPTIONS)
  const steps = integerOption('train', 'steps', values.steps, 1)
  const { config, label } = loadRunConfig(requireOption('train', 'config', values.config), steps)
  const data = resolve(values.data ?? bundledCorpus())
  return {
    name: values.name ?? label,
    config,
    dataset: { path: data, ...(values.tokenizer === undefined ? {} : { tokenizer: resolve(values.tokenizer) }) },
    ...(values.init === undefined ? {} : { init: resolve(values.init) }),
  }
}

// Reports how a followed run ended; the exit code is 0 only for a finished run.
export function reportEnd(ctx: CliContext, host: Host, end: RunSummary): number {
  const record = host.store.getRun(end.id)
  const step = record?.step ?? end.step
  if (end.status === 'finished') {
    ctx.out.write(
      `run ${end.id} finished: step ${step}/${end.totalSteps}, loss ${formatLoss(record?.lastLoss)}, ${formatRate(record?.tokensPerSec)} tok/s\n` +
        `  checkpoints in ${record?.runDir ?? '?'}\n  details: moe-workbench show ${end.id}\n`,
    )
    return 0
  }
  if (end.status === 'stopped') {
    ctx.err.write(`run ${end.id} stopped at step ${step}/${end.totalSteps}; continue it with: moe-workbench resume ${end.id}\n`)
    return 1
  }
  ctx.err.write(`run ${end.id} ${end.status} at step ${step}: ${end.error ?? record?.error ?? 'no reason recorded'}\n`)
  return 1
}

export async function followNewRun(ctx: CliContext, host: Host, spec: RunSpec): Promise<number> {
  // Tokenized before the run exists, so bad data is an error with nothing recorded; the run then
  // finds the shard in the cache.
  ctx.out.write(`preparing ${spec.dataset.path}\n`)
  const data = await prepareDataset(spec.dataset, dataLayout(host.dataDir).cacheDir, { seqLen: spec.config.train.seq_len })
  const records = data.records
  ctx.out.write(
    `${data.tokens.toLocaleString('en-US')} tokens in ${data.path}` +
      (records ? ` (${records.records.toLocaleString('en-US')} records; ${records.truncated} truncated, ${records.dropped} dropped at ${spec.config.train.seq_len} tokens)` : '') +
      '\n',
  )
  const follower = new RunFollower(host, ctx)
  const created = await host.handlers['runs.create']({ spec })
  ctx.out.write(`run ${created.id} (${created.model}; ${created.strategy}) on ${spec.dataset.path}\n`)
  return reportEnd(ctx, host, await follower.follow(created))
}

export async function train(argv: string[], ctx: CliContext): Promise<number> {
  const spec = trainSpec(argv)
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    return await followNewRun(ctx, host, spec)
  } finally {
    await host.close()
  }
}
