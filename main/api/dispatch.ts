// The single path from an untrusted request to the host and back, used by every transport:
// params are parsed against the contract, the handler runs, and its result is checked against the
// contract before it leaves, so neither side ever sees data the contract does not describe.
import { ApiInputError, issuesOf, parseParams, requests, type ApiHandlers, type RequestName } from './contract'
import { isRequestName, type ApiErrorBody, type Reply } from './wire'

export async function dispatch(handlers: ApiHandlers, method: unknown, rawParams: unknown): Promise<Reply> {
  if (!isRequestName(method)) {
    const name = typeof method === 'string' ? method : String(method)
    return fail('unknown-method', `unknown request "${name}"`, [{ path: '', message: 'unknown request' }])
  }
  let params: unknown
  try {
    params = parseParams(method, rawParams)
  } catch (error) {
    return { error: errorBodyOf(error) }
  }
  let result: unknown
  try {
    result = await callHandler(handlers, method, params)
  } catch (error) {
    return { error: errorBodyOf(error) }
  }
  const checked = requests[method].result.safeParse(result)
  if (!checked.success)
    return fail('invalid-result', `${method}: the host answered with a malformed result`, issuesOf(checked.error))
  return { result: checked.data }
}

// The handler map is indexed by a name known only at run time; the params were parsed by the same
// contract entry, so the call is sound even though TypeScript cannot correlate the two.
function callHandler(handlers: ApiHandlers, method: RequestName, params: unknown): Promise<unknown> {
  const handler = handlers[method] as (p: unknown) => Promise<unknown>
  return handler(params)
}

// Input errors keep their field paths; anything else becomes a message without a stack trace.
export function errorBodyOf(error: unknown): ApiErrorBody {
  if (error instanceof ApiInputError) return { code: 'invalid-params', message: error.message, issues: error.issues }
  const message = error instanceof Error ? error.message : String(error)
  return { code: 'failed', message, issues: [] }
}

function fail(code: ApiErrorBody['code'], message: string, issues: ApiErrorBody['issues']): Reply {
  return { error: { code, message, issues } }
}
