// A failed request as the UI sees it: what went wrong and, for bad input, which fields.
import type { ApiErrorBody, ApiErrorCode } from '../wire'

export class ApiError extends Error {
  readonly code: ApiErrorCode
  readonly issues: { path: string; message: string }[]

  constructor(
    readonly method: string,
    body: ApiErrorBody,
  ) {
    super(body.message)
    this.name = 'ApiError'
    this.code = body.code
    this.issues = body.issues
  }

  // The messages for one field (e.g. 'spec.config.model.top_k'), for showing next to its input.
  issuesAt(path: string): string[] {
    return this.issues.filter((issue) => issue.path === path).map((issue) => issue.message)
  }
}
