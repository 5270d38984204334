// What travels between a transport's two ends, shared by the IPC adapter, the WebSocket server, the
// preload bridge and the renderer client. Errors travel as data (never as thrown objects) because
// Electron's IPC and JSON both drop everything but an Error's message; the field paths must survive.
import { z } from 'zod'

import { ValidationIssueSchema, requests, events, type EventName, type RequestName } from './contract'

export const ApiErrorCodeSchema = z.enum([
  'unknown-method', // no such request in the contract
  'invalid-params', // params failed the contract (or the host's deeper checks); issues name the fields
  'invalid-result', // the host answered with something the contract does not allow
  'failed', // the handler threw
  'disconnected', // the transport went away before the answer came
  'bad-message', // a WebSocket frame that is not a request
])

export const ApiErrorBodySchema = z.object({
  code: ApiErrorCodeSchema,
  message: z.string(),
  issues: z.array(ValidationIssueSchema),
})

export type ApiErrorCode = z.output<typeof ApiErrorCodeSchema>
export type ApiErrorBody = z.output<typeof ApiErrorBodySchema>

// One answer to one request.
export type Reply = { result: unknown } | { error: ApiErrorBody }

export const ReplySchema = z.union([
  z.object({ result: z.unknown() }).strict(),
  z.object({ error: ApiErrorBodySchema }).strict(),
])

// `window.api` as the preload script exposes it: untyped on purpose, the renderer client adds the
// contract's types and validates what comes back.
export interface PreloadApi {
  invoke(name: string, params: unknown): Promise<Reply>
  on(event: string, listener: (payload: unknown) => void): () => void
}

// Own-property checks: a name like "constructor" must not reach the contract's lookup tables.
export const isRequestName = (name: unknown): name is RequestName =>
  typeof name === 'string' && Object.hasOwn(requests, name)

export const isEventName = (name: unknown): name is EventName =>
  typeof name === 'string' && Object.hasOwn(events, name)

// Browser mode: the WebSocket endpoint, relative to the page the server served.
export const SOCKET_PATH = '/api'
