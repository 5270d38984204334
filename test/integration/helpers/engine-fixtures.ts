// Small inputs for engine tests: a byte-level token shard in the engine's format
// (native/engine/train/token_data.h) and a tiny mixtral config that trains in milliseconds per step.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import type { RunConfig } from '../../../main/api/config'
import { RunConfigSchema } from '../../../main/api/config'
import { repoRoot } from './engine-paths'

const HEADER_BYTES = 64

/** Writes tokens (uint16) as a MOETOK01 shard without a loss mask. */
export function writeTokenShard(path: string, tokens: ArrayLike<number>, vocabSize = 256): string {
  const buf = Buffer.alloc(HEADER_BYTES + 2 * tokens.length)
  buf.write('MOETOK01', 0, 'latin1')
  buf.writeUInt32LE(2, 8)
  buf.writeUInt32LE(0, 12)
  buf.writeBigUInt64LE(BigInt(tokens.length), 16)
  buf.writeUInt32LE(vocabSize, 24)
  for (let i = 0; i < tokens.length; i++) buf.writeUInt16LE(tokens[i], HEADER_BYTES + 2 * i)
  writeFileSync(path, buf)
  return path
}

/** A byte-level shard of the bundled demo corpus (its first `tokens` bytes). */
export function writeCorpusShard(path: string, tokens = 16_384): string {
  const text = readFileSync(join(repoRoot, 'resources', 'corpus', 'python-tutorial.txt'))
  return writeTokenShard(path, text.subarray(0, tokens))
}

export function tinyConfig(train: Partial<RunConfig['train']> = {}, model: Partial<RunConfig['model']> = {}): RunConfig {
  return RunConfigSchema.parse({
    model: {
      arch: 'mixtral', vocab_size: 256, d_model: 64, n_layers: 2, n_heads: 4, max_seq_len: 32, d_ff: 128, n_experts: 4, top_k: 2,
      ...model,
    },
    train: { batch_size: 4, seq_len: 32, steps: 12, lr: 1e-3, warmup_steps: 2, threads: 2, checkpoint_every: 0, ...train },
  })
}
