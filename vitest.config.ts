import { fileURLToPath } from 'node:url'

import { defineConfig } from 'vitest/config'

// Node-side unit and integration tests. `electron` cannot be required under plain Node (it would try
// to download its runtime), so tests get a small mock with the same surface.
export default defineConfig({
  resolve: {
    alias: { electron: fileURLToPath(new URL('./test/mocks/electron.ts', import.meta.url)) },
  },
  test: {
    include: ['test/unit/**/*.test.ts', 'test/integration/**/*.test.ts', 'test/renderer/**/*.test.ts'],
    environment: 'node',
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
})
