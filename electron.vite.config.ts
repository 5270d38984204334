import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

import vue from '@vitejs/plugin-vue'
import { defineConfig } from 'electron-vite'
import type { Plugin } from 'vite'

const fromRoot = (path: string) => fileURLToPath(new URL(path, import.meta.url))

// Entries must all exist: a build that silently left out the CLI or the engine worker would only
// fail when a user ran it.
function entries(files: Record<string, string>): Record<string, string> {
  const missing = Object.values(files).filter((file) => !existsSync(fromRoot(file)))
  if (missing.length > 0) throw new Error(`electron.vite.config.ts: entry files missing: ${missing.join(', ')}`)
  return Object.fromEntries(Object.entries(files).map(([name, file]) => [name, fromRoot(file)]))
}

// Vite's dev server injects component styles as <style> elements; only there does the page's CSP
// allow inline styles. Built pages keep the strict policy.
const devStyleCsp: Plugin = {
  name: 'moe-workbench:dev-style-csp',
  apply: 'serve',
  transformIndexHtml: (html) => html.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'"),
}

export default defineConfig({
  main: {
    build: {
      outDir: 'out/main',
      rolldownOptions: {
        input: entries({
          index: 'main/index.ts',
          cli: 'main/cli/index.ts',
          'engine-worker': 'main/host/engine/engine-worker.ts',
        }),
        // Native code is loaded from disk at run time, never bundled.
        external: ['better-sqlite3', /\.node$/],
        output: { format: 'cjs' },
      },
    },
  },
  preload: {
    build: {
      outDir: 'out/preload',
      // A sandboxed preload can require nothing but 'electron': everything else is bundled in.
      externalizeDeps: false,
      rolldownOptions: {
        input: entries({ index: 'preload/index.ts' }),
        output: { format: 'cjs' },
      },
    },
  },
  renderer: {
    root: 'renderer',
    plugins: [vue(), devStyleCsp],
    build: {
      outDir: 'out/renderer',
      rolldownOptions: {
        input: entries({ index: 'renderer/index.html' }),
      },
    },
  },
})
