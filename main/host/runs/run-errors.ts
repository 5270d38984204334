// A run operation that does not fit the run's state or does not name a run; the message says what
// would work instead.
export class RunStateError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RunStateError'
  }
}
