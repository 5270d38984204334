// One error type for everything the store refuses or cannot read, so callers can tell a store
// problem (unknown run, corrupt row, schema from a newer build) from a bug.
export class StoreError extends Error {
  override name = 'StoreError'
}
