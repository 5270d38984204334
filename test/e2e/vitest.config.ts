import { defineConfig } from 'vitest/config'

// End-to-end tests: the built renderer in Debian's Chromium against browser mode. Run with
// `npx vitest run -c test/e2e/vitest.config.ts`; they build the app first (set E2E_SKIP_BUILD=1 to
// reuse out/).
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/e2e/**/*.test.ts'],
    environment: 'node',
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
  },
})
