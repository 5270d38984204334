// A dataset problem the user can fix: names the file and, where known, the line and field at fault.
export class DatasetError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
    readonly line?: number,
    readonly field?: string,
  ) {
    const where = line === undefined ? file : `${file} line ${line}`
    super(`${where}${field === undefined ? '' : ` field "${field}"`}: ${problem}`)
    this.name = 'DatasetError'
  }
}
