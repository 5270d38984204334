// What a command may touch: its output streams, the host it opens, and Ctrl-C. Tests and the real
// entry point supply different ones.
import type { Host, HostOptions } from '../host/host'
import type { ProgressOutput } from './progress'

export interface CliContext {
  out: ProgressOutput
  err: { write(text: string): unknown }
  dataDir: string
  openHost(options?: Pick<HostOptions, 'recoverRuns'>): Promise<Host>
  /** Calls handler on each Ctrl-C (SIGINT) or SIGTERM until the returned function is called. */
  onInterrupt(handler: () => void): () => void
}
