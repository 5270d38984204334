// The CLI tests run the real bundle (out/main/cli.js with its engine worker, out/renderer for serve).
// It is rebuilt with `npx electron-vite build` only when missing or older than a source file.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

import { findPackageRoot } from '../../main/host/engine/addon'

export const repoRoot = findPackageRoot(import.meta.dirname) as string
export const binPath = join(repoRoot, 'bin', 'moe-workbench.js')

const OUTPUTS = ['out/main/cli.js', 'out/main/engine-worker.js', 'out/renderer/index.html']
const SOURCES = ['main', 'preload', 'renderer', 'electron.vite.config.ts']

function newestMtime(path: string): number {
  const info = statSync(path)
  if (!info.isDirectory()) return info.mtimeMs
  return readdirSync(path).reduce((newest, name) => Math.max(newest, newestMtime(join(path, name))), 0)
}

export function ensureBuilt(): void {
  const outputs = OUTPUTS.map((p) => join(repoRoot, p))
  const built = outputs.every(existsSync) ? Math.min(...outputs.map((p) => statSync(p).mtimeMs)) : 0
  const sources = Math.max(...SOURCES.map((p) => join(repoRoot, p)).filter(existsSync).map(newestMtime))
  if (built >= sources) return
  execFileSync('npx', ['electron-vite', 'build'], { cwd: repoRoot, stdio: 'pipe' })
}
