// Token shard files in the engine's format (native/engine/train/token_data.h), little-endian:
//   0: magic "MOETOK01"   8: u32 token_bytes (2 or 4)   12: u32 flags (bit 0: loss mask follows the tokens)
//   16: u64 n_tokens      24: u32 vocab_size (0 = unknown)   28..63: zero
//   64: n_tokens tokens, then (flags bit 0) n_tokens mask bytes (1 = prediction target, 0 = masked)
import { randomBytes } from 'node:crypto'
import { open, rename, rm } from 'node:fs/promises'

import { DatasetError } from './errors'

export const SHARD_MAGIC = 'MOETOK01'
export const SHARD_HEADER_BYTES = 64
const MASK_FLAG = 1

export interface ShardHeader {
  tokenBytes: 2 | 4
  hasMask: boolean
  tokens: number
  vocabSize: number
}

// uint16 holds ids below 65536, so a vocabulary of up to 65536 entries fits.
export const tokenBytesFor = (vocabSize: number): 2 | 4 => (vocabSize <= 65536 ? 2 : 4)

export function encodeShardHeader(h: ShardHeader): Buffer {
  const b = Buffer.alloc(SHARD_HEADER_BYTES)
  b.write(SHARD_MAGIC, 0, 'latin1')
  b.writeUInt32LE(h.tokenBytes, 8)
  b.writeUInt32LE(h.hasMask ? MASK_FLAG : 0, 12)
  b.writeBigUInt64LE(BigInt(h.tokens), 16)
  b.writeUInt32LE(h.vocabSize, 24)
  return b
}

// Checks a header against the file size exactly as the engine will, naming the byte at fault.
export function decodeShardHeader(file: string, header: Buffer, fileBytes: number): ShardHeader {
  const bad = (byte: number, problem: string) => new DatasetError(file, `${problem} (byte ${byte})`)
  if (fileBytes < SHARD_HEADER_BYTES || header.length < SHARD_HEADER_BYTES)
    throw bad(0, `is ${fileBytes} bytes, shorter than the 64-byte token shard header`)
  if (header.toString('latin1', 0, 8) !== SHARD_MAGIC) throw bad(0, 'missing magic "MOETOK01"; this is not a token shard')
  const tokenBytes = header.readUInt32LE(8)
  if (tokenBytes !== 2 && tokenBytes !== 4) throw bad(8, `token_bytes is ${tokenBytes}, expected 2 or 4`)
  const flags = header.readUInt32LE(12)
  if (flags & ~MASK_FLAG) throw bad(12, `unknown flag bits ${flags & ~MASK_FLAG}; only bit 0 (mask) is defined`)
  const tokens = header.readBigUInt64LE(16)
  const vocabSize = header.readUInt32LE(24)
  for (let i = 28; i < SHARD_HEADER_BYTES; i++)
    if (header[i] !== 0) throw bad(i, `reserved header byte is ${header[i]}, expected 0`)
  const hasMask = (flags & MASK_FLAG) !== 0
  const expected = BigInt(SHARD_HEADER_BYTES) + tokens * BigInt(tokenBytes + (hasMask ? 1 : 0))
  if (expected !== BigInt(fileBytes))
    throw bad(16, `is ${fileBytes} bytes but n_tokens ${tokens} needs ${expected}; the file is truncated or has trailing data`)
  return { tokenBytes, hasMask, tokens: Number(tokens), vocabSize }
}

export async function readShardHeader(file: string): Promise<ShardHeader> {
  let handle
  try {
    handle = await open(file, 'r')
  } catch (e) {
    throw new DatasetError(file, `cannot open: ${(e as Error).message}`)
  }
  try {
    const { size } = await handle.stat()
    const header = Buffer.alloc(SHARD_HEADER_BYTES)
    await handle.read(header, 0, SHARD_HEADER_BYTES, 0)
    return decodeShardHeader(file, header, size)
  } finally {
    await handle.close()
  }
}

export interface TokenShard {
  tokens: Uint32Array
  mask: Uint8Array | null // one 0/1 byte per token; null = every token is a target
  vocabSize: number
}

function tokenBody(shard: TokenShard, tokenBytes: 2 | 4): Buffer {
  // Typed arrays use the machine's byte order, little-endian like the file on every machine the engine
  // builds for (it refuses to compile elsewhere).
  const narrow = tokenBytes === 2 ? Uint16Array.from(shard.tokens) : shard.tokens
  return Buffer.from(narrow.buffer, narrow.byteOffset, narrow.byteLength)
}

// Writes to a temporary name in the same directory, fsyncs and renames, so a reader never sees a
// partial shard and a failure leaves nothing behind.
export async function writeTokenShard(path: string, shard: TokenShard): Promise<ShardHeader> {
  if (shard.mask && shard.mask.length !== shard.tokens.length)
    throw new DatasetError(path, `mask has ${shard.mask.length} entries for ${shard.tokens.length} tokens`)
  const header: ShardHeader = {
    tokenBytes: tokenBytesFor(shard.vocabSize),
    hasMask: shard.mask !== null,
    tokens: shard.tokens.length,
    vocabSize: shard.vocabSize,
  }
  const temp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`
  try {
    const handle = await open(temp, 'wx')
    try {
      await handle.write(encodeShardHeader(header))
      await handle.write(tokenBody(shard, header.tokenBytes))
      if (shard.mask) await handle.write(shard.mask)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(temp, path)
  } catch (e) {
    await rm(temp, { force: true })
    throw e
  }
  return header
}
