// Accumulates token ids and their loss-mask bytes in growable typed arrays, rejecting ids a
// tokenizer should never produce (an unknown piece without an unk token comes back undefined).
import { DatasetError } from './errors'
import type { TokenShard } from './token-shard'

export interface TokenSource {
  file: string
  line?: number
  field?: string
}

export class TokenBuilder {
  private tokens = new Uint32Array(1 << 16)
  private mask = new Uint8Array(1 << 16)
  private length = 0
  private masked = false

  constructor(private readonly vocabSize: number) {}

  // target 0 marks tokens the loss skips (prompts); 1 marks prediction targets.
  push(ids: ArrayLike<number>, target: 0 | 1, source: TokenSource): void {
    this.reserve(ids.length)
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize)
        throw new DatasetError(source.file, `the tokenizer produced ${String(id)}, not a token id below its vocabulary size ${this.vocabSize} (a piece it cannot encode?)`, source.line, source.field)
      this.tokens[this.length] = id
      this.mask[this.length++] = target
    }
    if (target === 0 && ids.length > 0) this.masked = true
  }

  get size(): number {
    return this.length
  }

  // The mask is only stored when some token is masked; otherwise every token is a target anyway.
  finish(): TokenShard {
    return {
      tokens: this.tokens.slice(0, this.length),
      mask: this.masked ? this.mask.slice(0, this.length) : null,
      vocabSize: this.vocabSize,
    }
  }

  private reserve(extra: number): void {
    if (this.length + extra <= this.tokens.length) return
    const capacity = Math.max(this.tokens.length * 2, this.length + extra)
    const tokens = new Uint32Array(capacity)
    tokens.set(this.tokens.subarray(0, this.length))
    const mask = new Uint8Array(capacity)
    mask.set(this.mask.subarray(0, this.length))
    this.tokens = tokens
    this.mask = mask
  }
}
