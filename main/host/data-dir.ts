// Where the workbench keeps its database, run directories, token cache and scratch files.
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'

export const DATA_DIR_ENV = 'MOE_WORKBENCH_HOME'

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env[DATA_DIR_ENV]
  return fromEnv ? resolve(fromEnv) : join(homedir(), '.moe-workbench')
}

export function dataLayout(dataDir: string) {
  return {
    dbPath: join(dataDir, 'workbench.db'),
    runsDir: join(dataDir, 'runs'),
    cacheDir: join(dataDir, 'cache'),
    // Files that live only while something runs (a chat's SSD tier): on the user's disk, never a tmpfs /tmp.
    scratchDir: join(dataDir, 'scratch'),
  }
}
