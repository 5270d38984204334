// Run ids: the name as a slug plus a short random suffix, so ids read well in paths and lists and two
// runs with one name never collide.
import { randomBytes } from 'node:crypto'

const SLUG_MAX = 48
const SUFFIX_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789'

function slug(name: string): string {
  const s = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, SLUG_MAX)
    .replace(/^-+|-+$/g, '')
  return s || 'run'
}

function suffix(length = 6): string {
  return Array.from(randomBytes(length), (b) => SUFFIX_CHARS[b % SUFFIX_CHARS.length]).join('')
}

/** A fresh id for a run named `name`; `taken` rejects ids already in use. */
export function newRunId(name: string, taken: (id: string) => boolean): string {
  for (;;) {
    const id = `${slug(name)}-${suffix()}`
    if (!taken(id)) return id
  }
}
