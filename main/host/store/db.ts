// The driver seam: the only file that talks to a SQLite library. Everything above it sees the small
// `SqlDatabase` interface (positional parameters, cached prepared statements, IMMEDIATE transactions).
//
// Two drivers sit behind it, because no single SQLite binding loads in every runtime we ship:
// - better-sqlite3 12.x, built from source against Node 20's headers (npm_config_nodedir=/usr). Used by
//   the CLI, `serve`, the engine child process and the tests. Its binary is ABI-specific, so inside
//   Electron (Node >= 22, another ABI) `new Database()` throws when it loads the addon.
// - Node's built-in `node:sqlite` (DatabaseSync, Node >= 22.5), which Electron's Node has. It cannot
//   run under Node 20 (the module does not exist there), so it is only exercised inside Electron.
// better-sqlite3 is preferred; node:sqlite is taken only when better-sqlite3 fails to load. Both expose
// prepare().run/get/all, exec and close with the same semantics for the SQL we use (positional `?`
// parameters, blobs in as Uint8Array and out as Uint8Array/Buffer, integers as numbers), and every
// pragma and transaction is issued as plain SQL, so the wrapper below is shared. See docs/telemetry-schema.md.
import BetterSqlite3 from 'better-sqlite3'

export type SqlValue = number | string | Uint8Array | null
export type SqlRow = Record<string, unknown>
export type DriverName = 'better-sqlite3' | 'node:sqlite'

export interface SqlStatement {
  run(...params: SqlValue[]): { changes: number }
  get(...params: SqlValue[]): SqlRow | undefined
  all(...params: SqlValue[]): SqlRow[]
}

export interface SqlDatabase {
  readonly driver: DriverName
  readonly path: string
  readonly readonly: boolean
  /** Prepared once per SQL text and cached for the life of the connection. */
  prepare(sql: string): SqlStatement
  exec(sql: string): void
  /** BEGIN IMMEDIATE ... COMMIT (ROLLBACK on throw). Nested calls join the outer transaction. */
  transaction<T>(fn: () => T): T
  close(): void
}

export interface OpenDatabaseOptions {
  readonly?: boolean
  busyTimeoutMs?: number
}

// What both libraries' connection and statement objects look like to us.
interface RawStatement {
  run(...params: SqlValue[]): { changes: number | bigint }
  get(...params: SqlValue[]): unknown
  all(...params: SqlValue[]): unknown[]
}
interface RawConnection {
  prepare(sql: string): RawStatement
  exec(sql: string): unknown
  close(): unknown
}
type Opener = (path: string, readonly: boolean) => RawConnection

interface NodeSqliteModule {
  DatabaseSync: new (path: string, options?: { readOnly?: boolean }) => RawConnection
}

// The engine process writes step rows while main writes run metadata: wait for the lock, do not fail.
const DEFAULT_BUSY_TIMEOUT_MS = 10_000

interface Driver {
  name: DriverName
  open: Opener
}

let chosenDriver: Driver | undefined

function loadBetterSqlite3(): Driver {
  // Opening an in-memory database is what loads the addon; an ABI mismatch throws here.
  new BetterSqlite3(':memory:').close()
  return {
    name: 'better-sqlite3',
    open: (path, readonly) => new BetterSqlite3(path, readonly ? { readonly: true, fileMustExist: true } : {}),
  }
}

function loadNodeSqlite(): Driver {
  const mod = process.getBuiltinModule('node:sqlite') as NodeSqliteModule | undefined
  if (!mod) throw new Error(`node:sqlite is not available in Node ${process.versions.node} (it needs Node >= 22.5)`)
  return { name: 'node:sqlite', open: (path, readonly) => new mod.DatabaseSync(path, { readOnly: readonly }) }
}

function driver(): Driver {
  if (chosenDriver) return chosenDriver
  let betterError: unknown
  try {
    chosenDriver = loadBetterSqlite3()
  } catch (e) {
    betterError = e
    try {
      chosenDriver = loadNodeSqlite()
    } catch (nodeError) {
      throw new Error(
        `No SQLite driver could be loaded: better-sqlite3: ${message(betterError)}; ${message(nodeError)}. ` +
          'Rebuild better-sqlite3 for this runtime (npm_config_nodedir=/usr npm rebuild better-sqlite3).',
      )
    }
  }
  return chosenDriver
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}

/** Which driver this process uses (loads it on first call). */
export function sqliteDriverName(): DriverName {
  return driver().name
}

export function openDatabase(path: string, options: OpenDatabaseOptions = {}): SqlDatabase {
  const { name, open } = driver()
  const readonly = options.readonly ?? false
  const raw = open(path, readonly)
  try {
    raw.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS)}`)
    raw.exec('PRAGMA foreign_keys = ON')
    if (!readonly) {
      // WAL is a property of the file (readers then never block the writer); NORMAL sync is durable
      // against process crashes and costs no fsync per commit in WAL mode.
      raw.exec('PRAGMA journal_mode = WAL')
      raw.exec('PRAGMA synchronous = NORMAL')
    }
  } catch (e) {
    raw.close()
    throw e
  }
  return new Connection(name, path, readonly, raw)
}

class Connection implements SqlDatabase {
  private readonly statements = new Map<string, SqlStatement>()
  private depth = 0

  constructor(
    readonly driver: DriverName,
    readonly path: string,
    readonly readonly: boolean,
    private readonly raw: RawConnection,
  ) {}

  prepare(sql: string): SqlStatement {
    let statement = this.statements.get(sql)
    if (!statement) {
      const prepared = this.raw.prepare(sql)
      statement = {
        run: (...params) => ({ changes: Number(prepared.run(...params).changes) }),
        get: (...params) => prepared.get(...params) as SqlRow | undefined,
        all: (...params) => prepared.all(...params) as SqlRow[],
      }
      this.statements.set(sql, statement)
    }
    return statement
  }

  exec(sql: string): void {
    this.raw.exec(sql)
  }

  // IMMEDIATE takes the write lock up front, so a busy database makes BEGIN wait (busy_timeout)
  // instead of failing later when a deferred read transaction tries to upgrade.
  transaction<T>(fn: () => T): T {
    if (this.depth > 0) return fn()
    this.prepare('BEGIN IMMEDIATE').run()
    this.depth++
    try {
      const result = fn()
      this.prepare('COMMIT').run()
      return result
    } catch (e) {
      try {
        this.prepare('ROLLBACK').run()
      } catch {
        // SQLite already rolled back (e.g. a failed COMMIT); the original error is what matters.
      }
      throw e
    } finally {
      this.depth--
    }
  }

  close(): void {
    this.statements.clear()
    this.raw.close()
  }
}
