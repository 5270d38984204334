import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import type WebSocket from 'ws'

import type { RunSummary } from '../../main/api/contract'
import { startServer, type RunningServer } from '../../main/server'
import { eventHub, fakeHandlers, stepEvent, summary, tinyWith, validParams } from './contract-fixtures'
import { httpGet, messages, openSocket, refusalStatus } from './server-helpers'

const TOKEN = 'test-token-0123456789abcdefghijklmnopqrstuvwxyz'

let staticDir: string
let server: RunningServer
let host: ReturnType<typeof fakeHandlers>
let hub: ReturnType<typeof eventHub>
const sockets: WebSocket[] = []

beforeAll(async () => {
  staticDir = mkdtempSync(join(tmpdir(), 'moe-server-'))
  mkdirSync(join(staticDir, 'assets'))
  writeFileSync(join(staticDir, 'index.html'), '<!doctype html><title>MoE Workbench</title>')
  writeFileSync(join(staticDir, 'assets', 'app-1234.js'), 'console.log(1)')
  writeFileSync(join(tmpdir(), 'moe-server-secret.txt'), 'secret')
  host = fakeHandlers()
  hub = eventHub()
  server = await startServer({ handlers: host, onEvent: hub.onEvent, staticDir, token: TOKEN })
})

afterAll(async () => {
  await server.close()
  rmSync(staticDir, { recursive: true, force: true })
})

afterEach(() => {
  for (const socket of sockets.splice(0)) socket.terminate()
  host.calls.length = 0
})

const cookie = () => `moe_workbench_${server.port}=${TOKEN}`
const hostHeader = () => `127.0.0.1:${server.port}`
const socketUrl = (query = '') => `ws://127.0.0.1:${server.port}/api${query}`

async function signedInSocket(): Promise<WebSocket> {
  const socket = await openSocket(socketUrl(), { headers: { Cookie: cookie() }, origin: `http://${hostHeader()}` })
  sockets.push(socket)
  return socket
}

function connectionRefused(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: address, port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'))
  })
}

describe('listening', () => {
  it('binds 127.0.0.1 only', async () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/?token=${TOKEN}`)
    expect(await connectionRefused('127.0.0.1', server.port)).toBe(false)
    // 127.0.0.2 is loopback too, but only a socket bound to 0.0.0.0 would answer there.
    expect(await connectionRefused('127.0.0.2', server.port)).toBe(true)
  })

  it.each(['0.0.0.0', '::', '192.168.1.10', 'example.com', '127.0.0.2'])('refuses to listen on %s', async (address) => {
    await expect(startServer({ handlers: host, onEvent: hub.onEvent, staticDir, host: address })).rejects.toThrow(/127\.0\.0\.1 only/)
  })

  it('refuses a short token and makes a long random one by default', async () => {
    await expect(startServer({ handlers: host, onEvent: hub.onEvent, staticDir, token: 'short' })).rejects.toThrow(/at least/)
    const first = await startServer({ handlers: host, onEvent: hub.onEvent, staticDir })
    const second = await startServer({ handlers: host, onEvent: hub.onEvent, staticDir })
    try {
      expect(first.token.length).toBeGreaterThanOrEqual(32)
      expect(first.token).not.toBe(second.token)
      expect(first.port).not.toBe(second.port)
    } finally {
      await Promise.all([first.close(), second.close()])
    }
  })
})

describe('HTTP', () => {
  it('refuses requests without the token', async () => {
    const answer = await httpGet(server.port, '/')
    expect(answer.status).toBe(401)
    expect(answer.body).toMatch(/moe-workbench serve/)
    expect((await httpGet(server.port, '/assets/app-1234.js')).status).toBe(401)
  })

  it('refuses a wrong token, in the URL or the cookie', async () => {
    expect((await httpGet(server.port, '/?token=' + TOKEN.slice(0, -1) + 'X')).status).toBe(401)
    expect((await httpGet(server.port, '/', { Cookie: `moe_workbench_${server.port}=nope` })).status).toBe(401)
    // A cookie for another server's port is not ours.
    expect((await httpGet(server.port, '/', { Cookie: `moe_workbench_1=${TOKEN}` })).status).toBe(401)
  })

  it('trades the URL token for an HttpOnly SameSite=Strict cookie and strips it from the address', async () => {
    const answer = await httpGet(server.port, `/?token=${TOKEN}&view=runs`)
    expect(answer.status).toBe(303)
    expect(answer.headers.location).toBe('/?view=runs')
    const [setCookie] = answer.headers['set-cookie'] ?? []
    expect(setCookie).toMatch(new RegExp(`^moe_workbench_${server.port}=${TOKEN};`))
    expect(setCookie).toMatch(/HttpOnly/)
    expect(setCookie).toMatch(/SameSite=Strict/)
  })

  it('serves the renderer with a strict CSP to a signed-in browser', async () => {
    const page = await httpGet(server.port, '/', { Cookie: cookie() })
    expect(page.status).toBe(200)
    expect(page.body).toContain('MoE Workbench')
    expect(page.headers['content-type']).toMatch(/text\/html/)
    const csp = String(page.headers['content-security-policy'])
    expect(csp).toContain("default-src 'self'")
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain(`connect-src 'self' ws://${hostHeader()}`)
    expect(page.headers['referrer-policy']).toBe('no-referrer')
    const script = await httpGet(server.port, '/assets/app-1234.js', { Cookie: cookie() })
    expect(script.status).toBe(200)
    expect(script.headers['content-type']).toMatch(/text\/javascript/)
    expect(script.headers['cache-control']).toMatch(/immutable/)
  })

  it('falls back to index.html for app routes and 404s missing files', async () => {
    expect((await httpGet(server.port, '/runs/run-1', { Cookie: cookie() })).body).toContain('MoE Workbench')
    expect((await httpGet(server.port, '/assets/missing.js', { Cookie: cookie() })).status).toBe(404)
  })

  it('never serves files outside the renderer directory', async () => {
    for (const path of ['/../moe-server-secret.txt', '/%2e%2e/moe-server-secret.txt', '/assets/..%2f..%2fmoe-server-secret.txt', '/%00']) {
      const answer = await httpGet(server.port, path, { Cookie: cookie() })
      expect(answer.body).not.toContain('secret')
    }
  })

  it('refuses requests addressed to another host name (DNS rebinding)', async () => {
    const answer = await httpGet(server.port, '/', { Cookie: cookie(), Host: `evil.example:${server.port}` })
    expect(answer.status).toBe(403)
  })

  it('answers only GET and HEAD', async () => {
    expect((await httpGet(server.port, '/', { Cookie: cookie() }, 'POST')).status).toBe(405)
    const head = await httpGet(server.port, '/', { Cookie: cookie() }, 'HEAD')
    expect(head.status).toBe(200)
    expect(head.body).toBe('')
  })

  it('says how to build the UI when it is missing', async () => {
    const bare = await startServer({ handlers: host, onEvent: hub.onEvent, staticDir: join(staticDir, 'missing'), token: TOKEN })
    try {
      const answer = await httpGet(bare.port, '/', { Cookie: `moe_workbench_${bare.port}=${TOKEN}` })
      expect(answer.status).toBe(503)
      expect(answer.body).toMatch(/npm run build/)
    } finally {
      await bare.close()
    }
  })
})

describe('WebSocket handshake', () => {
  it('is refused without a token', async () => {
    expect(await refusalStatus(openSocket(socketUrl()))).toBe(401)
    expect(await refusalStatus(openSocket(socketUrl('?token=wrong'), { origin: `http://${hostHeader()}` }))).toBe(401)
  })

  it('is accepted with the token in the query or the cookie', async () => {
    sockets.push(await openSocket(socketUrl(`?token=${TOKEN}`)))
    sockets.push(await signedInSocket())
  })

  it('is refused from another origin, even with the token', async () => {
    expect(await refusalStatus(openSocket(socketUrl(), { headers: { Cookie: cookie() }, origin: 'http://evil.example' }))).toBe(403)
    expect(await refusalStatus(openSocket(socketUrl(), { headers: { Cookie: cookie() }, origin: `http://127.0.0.1:${server.port + 1}` }))).toBe(403)
    expect(await refusalStatus(openSocket(socketUrl(), { headers: { Cookie: cookie() }, origin: 'null' }))).toBe(403)
  })

  it('is refused on other paths and for other host names', async () => {
    expect(await refusalStatus(openSocket(`ws://127.0.0.1:${server.port}/other?token=${TOKEN}`))).toBe(404)
    expect(await refusalStatus(openSocket(socketUrl(`?token=${TOKEN}`), { headers: { Host: 'evil.example' } }))).toBe(403)
  })
})

describe('WebSocket API', () => {
  it('routes a request to the handler and returns its result', async () => {
    const socket = await signedInSocket()
    const inbox = messages(socket)
    socket.send(JSON.stringify({ id: 1, method: 'runs.list', params: {} }))
    expect(await inbox.next((m) => m.id === 1)).toEqual({ id: 1, result: [summary()] })
    socket.send(JSON.stringify({ id: 'two', method: 'metrics.series', params: { id: 'run-1', metrics: ['loss'] } }))
    expect(await inbox.next((m) => m.id === 'two')).toMatchObject({ result: { values: { loss: [1, 2] } } })
    expect(host.calls.at(-1)).toEqual({ name: 'metrics.series', params: { id: 'run-1', metrics: ['loss'], maxPoints: 2000 } })
  })

  it('answers bad params with the failing field, without calling the handler', async () => {
    const socket = await signedInSocket()
    const inbox = messages(socket)
    const params = { spec: { ...validParams['runs.create'].spec, config: tinyWith('model', 'top_k', 9) } }
    socket.send(JSON.stringify({ id: 3, method: 'runs.create', params }))
    expect(await inbox.next((m) => m.id === 3)).toMatchObject({
      error: { code: 'invalid-params', issues: [{ path: 'spec.config.model.top_k' }] },
    })
    expect(host.calls).toEqual([])
  })

  it('answers unknown methods and malformed messages with errors', async () => {
    const socket = await signedInSocket()
    const inbox = messages(socket)
    socket.send(JSON.stringify({ id: 4, method: 'constructor', params: {} }))
    expect(await inbox.next((m) => m.id === 4)).toMatchObject({ error: { code: 'unknown-method' } })
    socket.send('not json')
    socket.send(JSON.stringify({ method: 'runs.list' }))
    await vi.waitFor(() => expect(inbox.all.filter((m) => m.id === null)).toHaveLength(2))
    for (const message of inbox.all.filter((m) => m.id === null)) expect(message).toMatchObject({ error: { code: 'bad-message' } })
  })

  it('drops a client that sends an oversized frame and keeps serving the others', async () => {
    const [greedy, polite] = [await signedInSocket(), await signedInSocket()]
    const closed = new Promise<number>((resolve) => greedy.once('close', (code) => resolve(code)))
    greedy.on('error', () => {})
    greedy.send(JSON.stringify({ id: 5, method: 'config.validate', params: { config: 'x'.repeat(5 * 1024 * 1024) } }))
    expect(await closed).toBe(1009)
    const inbox = messages(polite)
    polite.send(JSON.stringify({ id: 6, method: 'runs.list', params: {} }))
    expect(await inbox.next((m) => m.id === 6)).toMatchObject({ result: [summary()] })
  })

  it('pushes host events to every connected client', async () => {
    const [first, second] = [await signedInSocket(), await signedInSocket()]
    const inboxes = [messages(first), messages(second)]
    hub.emit('run.step', stepEvent('run-1', 12, 3.9))
    for (const inbox of inboxes)
      expect(await inbox.next((m) => m.event === 'run.step')).toEqual({ event: 'run.step', payload: stepEvent('run-1', 12, 3.9) })
  })

  it('does not push malformed events', async () => {
    const socket = await signedInSocket()
    const inbox = messages(socket)
    const log = vi.spyOn(console, 'error').mockImplementation(() => {})
    hub.emit('run.status', { ...summary(), status: 'exploded' } as unknown as RunSummary)
    hub.emit('run.status', summary({ status: 'finished' }))
    expect(await inbox.next((m) => m.event === 'run.status')).toMatchObject({ payload: { status: 'finished' } })
    expect(inbox.all.filter((m) => m.event === 'run.status')).toHaveLength(1)
    expect(log).toHaveBeenCalledOnce()
    log.mockRestore()
  })
})

describe('close', () => {
  it('disconnects clients, stops listening and unsubscribes from host events', async () => {
    const own = eventHub()
    const running = await startServer({ handlers: host, onEvent: own.onEvent, staticDir, token: TOKEN })
    const socket = await openSocket(`ws://127.0.0.1:${running.port}/api?token=${TOKEN}`)
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
    expect(own.listeners()).toBe(1)
    await running.close()
    expect(await closed).toBe(1001)
    expect(own.listeners()).toBe(0)
    expect(await connectionRefused('127.0.0.1', running.port)).toBe(true)
  })
})
