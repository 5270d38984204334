// `moe-workbench export RUN --to DIR`: a checkpoint as a Hugging Face checkpoint directory (or DIR, a model folder,
// written again); with --placement,
// serving hints from the run's recorded expert loads instead (SGLang expert location, llama.cpp -ot, hot experts).
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'

import { parseParams } from '../../api/contract'
import { pickCheckpoint } from '../../host/handlers'
import { parseBytes } from '../../api/bytes'
import { integerOption, parseCommandArgs, requireOption } from '../args'
import { UsageError } from '../usage'
import type { CliContext } from '../context'

const OPTIONS = {
  to: { type: 'string' },
  step: { type: 'string' },
  'model-type': { type: 'string' },
  bf16: { type: 'boolean' },
  placement: { type: 'boolean' },
  from: { type: 'string' },
  until: { type: 'string' },
  last: { type: 'string' },
  vram: { type: 'string' },
  'bytes-per-param': { type: 'string' },
  'pin-slots': { type: 'string' },
  'pin-policy': { type: 'string' },
  experts: { type: 'string' },
  adapter: { type: 'boolean' },
  'base-model': { type: 'string' },
} as const
type Values = ReturnType<typeof parseCommandArgs<typeof OPTIONS>>['values']

function numberOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`export: --${name} must be a number, got "${value}"`)
  return n
}

async function exportPlacement(id: string | undefined, values: Values, ctx: CliContext): Promise<number> {
  const vram = values.vram === undefined ? undefined : parseBytes(values.vram)
  if (vram === null) throw new UsageError(`export: --vram must be a size such as 24GiB or 8589934592, got "${values.vram}"`)
  const params = parseParams('checkpoints.exportServingHints', {
    id,
    dir: resolve(requireOption('export', 'to', values.to)),
    fromStep: integerOption('export', 'from', values.from, 1),
    toStep: integerOption('export', 'until', values.until, 1),
    lastSteps: integerOption('export', 'last', values.last, 1),
    vramBytes: vram,
    bytesPerParam: numberOption('bytes-per-param', values['bytes-per-param']),
    pinSlots: integerOption('export', 'pin-slots', values['pin-slots'], 0),
    pinPolicy: values['pin-policy'],
  })
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    const { dir, files, hints } = await host.handlers['checkpoints.exportServingHints'](params)
    ctx.out.write(`serving hints of run ${params.id} (steps ${hints.range.fromStep}-${hints.range.toStep}) in ${dir}: ${files.join(', ')}\n`)
    ctx.out.write(`  SGLang: ${hints.usage.sglang}\n  llama.cpp: ${hints.usage.llamaCpp}\n  hot experts: ${hints.usage.hotExperts}\n`)
    return 0
  } finally {
    await host.close()
  }
}

// `export DIR --to OUT`: a Hugging Face model folder written again (dtype, expert layout or model type), or a PEFT
// adapter folder merged into its base.
async function exportFolder(dir: string, values: Values, ctx: CliContext): Promise<number> {
  if (values.step !== undefined || values.adapter) throw new UsageError('export: --step and --adapter are for a run, not a model folder')
  const params = parseParams('models.export', {
    dir: resolve(dir),
    ...(values['base-model'] !== undefined ? { base: resolve(values['base-model']) } : {}),
    to: resolve(requireOption('export', 'to', values.to)),
    modelType: values['model-type'],
    dtype: values.bf16 ? 'bf16' : 'f32',
    expertLayout: values.experts,
  })
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    const { dir: out } = await host.handlers['models.export'](params)
    const experts = params.expertLayout ? `, ${params.expertLayout} experts` : ''
    ctx.out.write(`exported ${params.dir} as ${params.modelType ?? 'its model type'} ${params.dtype}${experts} to ${out}\n`)
    return 0
  } finally {
    await host.close()
  }
}

export async function exportRun(argv: string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parseCommandArgs('export', argv, OPTIONS, ['run'])
  if (values.placement) return exportPlacement(positionals[0], values, ctx)
  // A path to a model folder (or a PEFT adapter's) rather than a run id.
  const folder = positionals[0] === undefined ? null : resolve(positionals[0])
  if (folder && (existsSync(join(folder, 'config.json')) || existsSync(join(folder, 'adapter_config.json'))))
    return exportFolder(positionals[0]!, values, ctx)
  if (values['base-model'] !== undefined)
    throw new UsageError("export: --base-model is the base of a PEFT adapter folder; a run's adapter names the folder the run started from")
  const params = parseParams('checkpoints.export', {
    id: positionals[0],
    dir: resolve(requireOption('export', 'to', values.to)),
    step: integerOption('export', 'step', values.step, 0),
    modelType: values['model-type'],
    dtype: values.bf16 ? 'bf16' : 'f32',
    expertLayout: values.experts,
    format: values.adapter ? 'adapter' : 'merged',
  })
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    const { step } = pickCheckpoint(host.store, params.id, params.step)
    const { dir } = await host.handlers['checkpoints.export']({ ...params, step })
    const experts = params.expertLayout ? `, ${params.expertLayout} experts` : ''
    const what = params.format === 'adapter' ? 'the LoRA adapter (PEFT) of run' : 'run'
    ctx.out.write(`exported ${what} ${params.id} step ${step} as ${params.modelType} ${params.dtype}${experts} to ${dir}\n`)
    return 0
  } finally {
    await host.close()
  }
}
