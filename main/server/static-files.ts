// Serves the built renderer. Paths are confined to the static directory; unknown extensionless
// paths get index.html so a reload on a client-side route still opens the app.
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import type { ServerResponse } from 'node:http'
import { extname, join, resolve, sep } from 'node:path'

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.wasm': 'application/wasm',
  '.txt': 'text/plain; charset=utf-8',
}

export type StaticFile = { path: string; size: number; contentType: string; immutable: boolean }

// Resolves a URL path to a file under `root`, or undefined when there is none to serve.
export async function findStaticFile(root: string, urlPath: string): Promise<StaticFile | undefined> {
  let decoded: string
  try {
    decoded = decodeURIComponent(urlPath)
  } catch {
    return undefined
  }
  if (decoded.includes('\0')) return undefined
  const base = resolve(root)
  const candidate = resolve(base, `.${decoded}`)
  if (candidate !== base && !candidate.startsWith(base + sep)) return undefined

  const file = (await regularFile(candidate)) ?? (extname(decoded) === '' ? await regularFile(join(base, 'index.html')) : undefined)
  if (!file) return undefined
  return {
    ...file,
    contentType: contentTypes[extname(file.path).toLowerCase()] ?? 'application/octet-stream',
    // Vite puts content-hashed bundles under assets/; everything else may change between builds.
    immutable: file.path.startsWith(join(base, 'assets') + sep),
  }
}

async function regularFile(path: string): Promise<{ path: string; size: number } | undefined> {
  try {
    const info = await stat(path)
    return info.isFile() ? { path, size: info.size } : undefined
  } catch {
    return undefined
  }
}

export function sendStaticFile(response: ServerResponse, file: StaticFile, headOnly: boolean): void {
  response.writeHead(200, {
    'Content-Type': file.contentType,
    'Content-Length': file.size,
    'Cache-Control': file.immutable ? 'private, max-age=31536000, immutable' : 'no-cache',
  })
  if (headOnly) {
    response.end()
    return
  }
  const stream = createReadStream(file.path)
  stream.on('error', () => response.destroy())
  stream.pipe(response)
}
