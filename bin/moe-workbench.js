#!/usr/bin/env node
// `npx moe-workbench …`: runs the CLI bundled by `npx electron-vite build` (out/main/cli.js).
'use strict'
const { existsSync } = require('node:fs')
const { join } = require('node:path')

const root = join(__dirname, '..')
const cli = join(root, 'out', 'main', 'cli.js')
if (!existsSync(cli)) {
  process.stderr.write(`moe-workbench: ${cli} is missing; build it first:\n  cd ${root} && npx electron-vite build\n`)
  process.exit(1)
}
require(cli)
