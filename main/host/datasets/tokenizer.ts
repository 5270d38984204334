import type { ChatTemplate } from './chat-template'

// What the dataset pipeline needs from a tokenizer. `id` identifies its exact behaviour, so the
// token cache can key on it; `separator` ends each JSONL record (an end-of-sequence token or "\n").
export interface TextTokenizer {
  readonly id: string
  readonly vocabSize: number
  readonly separator: readonly number[]
  encode(text: string): number[]
  // Tokenizers over raw bytes take a file as it is, without UTF-8 decoding.
  encodeBytes?(bytes: Uint8Array): ArrayLike<number>
  decode(ids: readonly number[]): string
  /** The model's chat template and the end-of-turn marker it writes after an assistant's content, when it has one. */
  chat?: { template: ChatTemplate; marker: string }
}
