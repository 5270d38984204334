// Checks a new run's files before it is recorded, so a missing data file, a broken tokenizer or a
// vocabulary the model cannot hold is an input error on the field at fault, not a failed run.
// Tokenizing itself happens when the run starts (it can take a while on a large file).
import { stat } from 'node:fs/promises'
import { resolve } from 'node:path'

import { ApiInputError, type RunSpec } from '../api/contract'
import { DatasetError, isTokenShard, loadTokenizer, readShardHeader } from './datasets'

type Issue = { path: string; message: string }

async function kindOf(path: string): Promise<'file' | 'dir' | 'missing' | 'other'> {
  try {
    const info = await stat(path)
    return info.isFile() ? 'file' : info.isDirectory() ? 'dir' : 'other'
  } catch {
    return 'missing'
  }
}

async function datasetVocab(spec: RunSpec, issues: Issue[]): Promise<number | null> {
  const data = resolve(spec.dataset.path)
  const dataKind = await kindOf(data)
  if (dataKind !== 'file') {
    issues.push({ path: 'spec.dataset.path', message: `${data} ${dataKind === 'missing' ? 'does not exist' : 'is not a file'}` })
    return null
  }
  try {
    if (isTokenShard(data)) {
      if (spec.dataset.tokenizer !== undefined) {
        issues.push({ path: 'spec.dataset.tokenizer', message: 'a .bin token shard is already tokenized; leave the tokenizer out' })
        return null
      }
      return (await readShardHeader(data)).vocabSize || null
    }
    return (await loadTokenizer(spec.dataset.tokenizer)).vocabSize
  } catch (e) {
    if (!(e instanceof DatasetError)) throw e
    issues.push({ path: isTokenShard(data) ? 'spec.dataset.path' : 'spec.dataset.tokenizer', message: e.message })
    return null
  }
}

export async function checkRunInputs(spec: RunSpec): Promise<void> {
  const issues: Issue[] = []
  const vocab = await datasetVocab(spec, issues)
  if (vocab !== null && vocab > spec.config.model.vocab_size)
    issues.push({
      path: 'spec.config.model.vocab_size',
      message: `is ${spec.config.model.vocab_size}, but the dataset's tokens go up to ${vocab - 1}; set it to at least ${vocab}`,
    })
  if (spec.init !== undefined && (await kindOf(resolve(spec.init))) !== 'dir')
    issues.push({ path: 'spec.init', message: `${resolve(spec.init)} is not a checkpoint directory` })
  if (issues.length > 0) throw new ApiInputError('runs.create', issues)
}
