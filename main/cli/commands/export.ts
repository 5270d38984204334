// `moe-workbench export RUN --to DIR`: a checkpoint as a Hugging Face checkpoint directory.
import { resolve } from 'node:path'

import { parseParams } from '../../api/contract'
import { pickCheckpoint } from '../../host/handlers'
import { integerOption, parseCommandArgs, requireOption } from '../args'
import type { CliContext } from '../context'

const OPTIONS = { to: { type: 'string' }, step: { type: 'string' }, 'model-type': { type: 'string' }, bf16: { type: 'boolean' } } as const

export async function exportRun(argv: string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parseCommandArgs('export', argv, OPTIONS, ['run'])
  const params = parseParams('checkpoints.export', {
    id: positionals[0],
    dir: resolve(requireOption('export', 'to', values.to)),
    step: integerOption('export', 'step', values.step, 0),
    modelType: values['model-type'],
    dtype: values.bf16 ? 'bf16' : 'f32',
  })
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    const { step } = pickCheckpoint(host.store, params.id, params.step)
    const { dir } = await host.handlers['checkpoints.export']({ ...params, step })
    ctx.out.write(`exported run ${params.id} step ${step} as ${params.modelType} ${params.dtype} to ${dir}\n`)
    return 0
  } finally {
    await host.close()
  }
}
