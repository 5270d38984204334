// Token ids to text as they arrive: each push returns the text the new token added. The whole answer is decoded
// again each time (a token's text can depend on its neighbours: byte-level pieces of one character, a leading
// space), and nothing is returned while the text ends in an incomplete character.
export class TextStream {
  private readonly ids: number[] = []
  private emitted = ''

  constructor(private readonly decode: (ids: readonly number[]) => string) {}

  push(id: number): string {
    this.ids.push(id)
    const full = this.decode(this.ids)
    if (full.endsWith('\uFFFD')) return ''
    // A decoder that rewrites earlier text (cleanup of spaces) only ever adds what follows the common prefix.
    let common = 0
    while (common < this.emitted.length && common < full.length && full[common] === this.emitted[common]) common++
    const delta = full.slice(common)
    this.emitted = full
    return delta
  }

  get text(): string {
    return this.emitted
  }
}
