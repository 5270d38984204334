// Who may talk to the browser-mode server: requests that name a loopback host (so a DNS-rebound
// page cannot reach us under its own name), come from our own origin, and carry the session token.
import { randomBytes, timingSafeEqual } from 'node:crypto'

export const newSessionToken = (): string => randomBytes(32).toString('base64url')

// Shorter tokens are guessable enough to matter on a shared machine.
export const MIN_TOKEN_LENGTH = 32

export function tokensMatch(expected: string, given: string | null | undefined): boolean {
  if (!given) return false
  const a = Buffer.from(expected)
  const b = Buffer.from(given)
  return a.length === b.length && timingSafeEqual(a, b)
}

// Cookies are shared by every port of a host, so the name carries the port: two servers on one
// machine keep their own sessions.
export const sessionCookieName = (port: number): string => `moe_workbench_${port}`

export function sessionCookie(port: number, token: string): string {
  return `${sessionCookieName(port)}=${token}; Path=/; HttpOnly; SameSite=Strict`
}

export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

const loopbackNames = new Set(['127.0.0.1', 'localhost'])

// The Host header of a request that reached us through 127.0.0.1 (directly or over an SSH tunnel).
export function isLoopbackHostHeader(host: string | undefined): host is string {
  if (!host) return false
  const match = /^([^:]+)(?::(\d{1,5}))?$/.exec(host)
  return match !== null && loopbackNames.has(match[1]!.toLowerCase())
}

// Browsers always send Origin on a WebSocket handshake; it must be the page we served. Clients that
// are not browsers send none and are held to the token alone.
export function originAllowed(origin: string | undefined, host: string): boolean {
  return origin === undefined || origin === `http://${host}`
}
