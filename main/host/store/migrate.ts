// Brings a database to the newest schema this build knows, one transaction per migration, and
// refuses databases written by a newer build (their layout may mean something we cannot read).
import type { SqlDatabase } from './db'
import { StoreError } from './errors'
import { MIGRATIONS, type Migration } from './schema'

export function schemaVersion(db: SqlDatabase): number {
  return Number(db.prepare('PRAGMA user_version').get()?.user_version ?? 0)
}

function latestVersion(migrations: readonly Migration[]): number {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration list out of order: entry ${i} has version ${m.version}`)
  })
  return migrations.length
}

function refuseNewer(db: SqlDatabase, found: number, latest: number): void {
  if (found > latest)
    throw new StoreError(
      `${db.path}: telemetry schema version ${found} is newer than this build supports (${latest}); ` +
        'open it with a newer MoE Workbench',
    )
}

/** Applies every pending migration; returns the versions before and after. */
export function migrate(db: SqlDatabase, migrations: readonly Migration[] = MIGRATIONS): { from: number; to: number } {
  const latest = latestVersion(migrations)
  const from = schemaVersion(db)
  refuseNewer(db, from, latest)
  for (const m of migrations.slice(from)) {
    db.transaction(() => {
      // Another process may have migrated between our check and this write lock.
      const current = schemaVersion(db)
      refuseNewer(db, current, latest)
      if (current >= m.version) return
      db.exec(m.sql)
      db.exec(`PRAGMA user_version = ${m.version}`)
    })
  }
  return { from, to: schemaVersion(db) }
}

/** For read-only connections, which cannot migrate: the schema must be exactly this build's. */
export function assertCurrentSchema(db: SqlDatabase, migrations: readonly Migration[] = MIGRATIONS): void {
  const latest = latestVersion(migrations)
  const found = schemaVersion(db)
  refuseNewer(db, found, latest)
  if (found < latest)
    throw new StoreError(
      `${db.path}: telemetry schema version ${found} is older than this build's ${latest}; ` +
        'open it read-write once to migrate it',
    )
}
