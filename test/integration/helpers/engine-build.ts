// Builds main/host/engine/engine-worker.ts the way the app bundle does (one CommonJS file for Node,
// dependencies left to node_modules), into a folder under the repo's node_modules/.cache so that the
// bundle resolves better-sqlite3 and finds the addon from its own location.
import { rm } from 'node:fs/promises'
import { join } from 'node:path'

import { build } from 'vite'

import { repoRoot } from './engine-paths'

export interface BuiltWorker {
  entry: string
  dispose(): Promise<void>
}

export async function buildEngineWorker(): Promise<BuiltWorker> {
  const outDir = join(repoRoot, 'node_modules', '.cache', 'moe-engine-worker', `${process.pid}-${Date.now()}`)
  await build({
    configFile: false,
    root: repoRoot,
    logLevel: 'warn',
    build: {
      ssr: join(repoRoot, 'main/host/engine/engine-worker.ts'),
      outDir,
      emptyOutDir: true,
      target: 'node20',
      minify: false,
      rolldownOptions: { output: { format: 'cjs', entryFileNames: 'engine-worker.js' } },
    },
  })
  return { entry: join(outDir, 'engine-worker.js'), dispose: () => rm(outDir, { recursive: true, force: true }) }
}
