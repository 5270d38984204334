// Directory listing for the file pickers of browser mode (no native dialogs there): one level,
// directories first, hidden entries left out.
import { readdirSync, statSync } from 'node:fs'
import os from 'node:os'
import { dirname, join, resolve } from 'node:path'

import type { FileEntry } from '../api/contract'

export function listDirectory(dir: string = os.homedir()): { dir: string; parent: string | null; entries: FileEntry[] } {
  const abs = resolve(dir)
  const entries: FileEntry[] = []
  for (const d of readdirSync(abs, { withFileTypes: true })) {
    if (d.name.startsWith('.')) continue
    try {
      const st = statSync(join(abs, d.name))
      entries.push({ name: d.name, kind: st.isDirectory() ? 'dir' : 'file', bytes: st.isDirectory() ? 0 : st.size })
    } catch {
      // a dangling link or an entry that vanished while listing: not choosable
    }
  }
  entries.sort((a, b) => (a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind === 'dir' ? -1 : 1))
  return { dir: abs, parent: dirname(abs) === abs ? null : dirname(abs), entries }
}
