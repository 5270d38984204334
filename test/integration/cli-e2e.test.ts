import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'

import { TelemetryStore } from '../../main/host/store/store'
import { binPath, ensureBuilt, repoRoot } from './cli-build'

const ADDON = join(repoRoot, 'native', 'build-addon', 'Release', 'moe_engine_addon.node')
const dir = mkdtempSync(join(tmpdir(), 'moe-cli-'))
const home = join(dir, 'home')
const env = { ...process.env, MOE_WORKBENCH_HOME: home }

// Tiny shapes: a few milliseconds per step on one thread.
const configFile = join(dir, 'small.json')
writeFileSync(configFile, JSON.stringify({
  model: { arch: 'mixtral', vocab_size: 256, d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 32, d_ff: 32, n_experts: 4, top_k: 2 },
  train: { batch_size: 2, seq_len: 32, steps: 50, warmup_steps: 1, threads: 1, checkpoint_every: 2 },
}))

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [binPath, ...args], { cwd: dir, env, encoding: 'utf8', timeout: 90_000 })
  return { code: r.status, out: r.stdout, err: r.stderr }
}

// A CLI process in the background, its output collected as it comes.
function startCli(...args: string[]) {
  const child = spawn(process.execPath, [binPath, ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const output = { out: '', err: '' }
  child.stdout.on('data', (d: Buffer) => (output.out += d.toString()))
  child.stderr.on('data', (d: Buffer) => (output.err += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  // Resolves when stdout matches; fails if the process ends first.
  const waitFor = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const poll = setInterval(() => {
        const m = pattern.exec(output.out)
        if (m) {
          clearInterval(poll)
          resolve(m)
        }
      }, 50)
      void exited.then((code) => {
        clearInterval(poll)
        reject(new Error(`exited (${code}) before printing ${pattern}: ${output.out}${output.err}`))
      })
    })
  const interrupt = () => {
    child.kill('SIGINT')
    return exited
  }
  return { output, exited, waitFor, interrupt }
}

let runId = ''

beforeAll(() => ensureBuilt(), 180_000)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe.runIf(existsSync(ADDON))('moe-workbench CLI', () => {
  it('train runs through the engine worker and records the run in SQLite', () => {
    const r = cli('train', '--config', configFile, '--steps', '4', '--name', 'cli e2e')
    expect(r.err).toBe('')
    expect(r.code).toBe(0)
    // Not a TTY: plain progress lines with step, loss, tokens/s and ETA.
    expect(r.out).toMatch(/^step 1\/4 \| loss \d+\.\d{4} \| [\d,]+ tok\/s \| ETA /m)
    expect(r.out).toMatch(/^step 4\/4 \| loss \d+\.\d{4} \| [\d,]+ tok\/s \| ETA 0s$/m)
    runId = /run (\S+) finished: step 4\/4/.exec(r.out)![1]!

    const store = TelemetryStore.open(join(home, 'workbench.db'), { readonly: true })
    try {
      expect(store.getRun(runId)).toMatchObject({ name: 'cli e2e', status: 'finished', step: 4, totalSteps: 4 })
      expect(store.lastStep(runId)).toBe(4)
      expect(store.listCheckpoints(runId).map((c) => c.step)).toEqual([2, 4])
    } finally {
      store.close()
    }
  })

  it('runs and show read the run back from the database', () => {
    const list = cli('runs')
    expect(list.code).toBe(0)
    expect(list.out).toMatch(new RegExp(`^${runId}\\s+cli e2e\\s+finished\\s+4/4\\s+\\d+\\.\\d{4}`, 'm'))

    const show = cli('show', runId)
    expect(show.code).toBe(0)
    expect(show.out).toContain(`Run ${runId}: cli e2e`)
    expect(show.out).toContain('model     mixtral L2 d32 4x top-2')
    expect(show.out).toMatch(/Last step \(4\): loss \d+\.\d{4}, aux_loss/)
    expect(show.out).toContain(join(home, 'runs', runId, 'checkpoint-4'))
    expect(show.out).toMatch(/finished\s+finished at step 4/)
  })

  it('export writes config.json and model.safetensors, and never overwrites', () => {
    const to = join(dir, 'export-f32')
    const r = cli('export', runId, '--to', to)
    expect(r.err).toBe('')
    expect(r.out).toBe(`exported run ${runId} step 4 as mixtral f32 to ${to}\n`)
    const config = JSON.parse(readFileSync(join(to, 'config.json'), 'utf8')) as { model_type: string; num_local_experts: number }
    expect(config).toMatchObject({ model_type: 'mixtral', num_local_experts: 4 })
    const weights = readFileSync(join(to, 'model.safetensors'))
    const headerBytes = Number(weights.readBigUInt64LE(0))
    const header = JSON.parse(weights.toString('utf8', 8, 8 + headerBytes)) as Record<string, { dtype: string; data_offsets: [number, number] }>
    const tensors = Object.entries(header).filter(([name]) => name !== '__metadata__')
    expect(tensors.map(([name]) => name)).toContain('model.layers.0.block_sparse_moe.experts.3.w2.weight')
    expect(new Set(tensors.map(([, t]) => t.dtype))).toEqual(new Set(['F32']))
    expect(weights.length).toBe(8 + headerBytes + Math.max(...tensors.map(([, t]) => t.data_offsets[1])))

    const again = cli('export', runId, '--to', to, '--bf16')
    expect(again.code).toBe(1)
    expect(again.err).toMatch(/already exists and is not empty/)

    // The engine's own refusal comes through with the field at fault (Qwen2-MoE's qkv_bias may be false; its
    // shared expert may not be absent).
    const qwen = cli('export', runId, '--to', join(dir, 'export-qwen'), '--model-type', 'qwen2_moe')
    expect(qwen.code).toBe(1)
    expect(qwen.err).toMatch(/model\.shared_expert_d_ff: is 0; Qwen2-MoE always has a shared expert/)
    expect(existsSync(join(dir, 'export-qwen'))).toBe(false)

    const earlier = cli('export', runId, '--step', '2', '--to', join(dir, 'export-bf16'), '--bf16')
    expect(earlier.out).toContain('step 2 as mixtral bf16')
    const bf16 = readFileSync(join(dir, 'export-bf16', 'model.safetensors'))
    expect(bf16.toString('utf8', 8, 8 + Number(bf16.readBigUInt64LE(0)))).toContain('"BF16"')

    // A model folder written again: bf16 with fused experts, then per-expert: the run's own bf16 export, byte for byte.
    const fused = join(dir, 'export-fused'), back = join(dir, 'export-back')
    const converted = cli('export', to, '--to', fused, '--bf16', '--experts', 'fused')
    expect(converted.err).toBe('')
    expect(converted.out).toBe(`exported ${to} as its model type bf16, fused experts to ${fused}\n`)
    const fusedWeights = readFileSync(join(fused, 'model.safetensors'))
    const fusedHeader = fusedWeights.toString('utf8', 8, 8 + Number(fusedWeights.readBigUInt64LE(0)))
    expect(fusedHeader).toMatch(/"model\.layers\.0\.[a-z_]+\.experts\.gate_up_proj"/)
    expect(fusedHeader).toContain('"BF16"')
    expect(cli('export', fused, '--to', back, '--bf16', '--experts', 'per-expert').code).toBe(0)
    const direct = join(dir, 'export-direct')
    expect(cli('export', runId, '--to', direct, '--bf16').code).toBe(0)
    expect(readFileSync(join(back, 'model.safetensors')).equals(readFileSync(join(direct, 'model.safetensors')))).toBe(true)
    expect(readdirSync(dir).filter((name) => name.includes('.experts-'))).toEqual([])
    const notOne = cli('export', to, '--to', join(dir, 'export-adapter'), '--adapter')
    expect(notOne.code).toBe(2)
    expect(notOne.err).toMatch(/--step and --adapter are for a run/)
  })

  it('exits 2 on usage errors and 1 naming the field or file on bad input', () => {
    expect(cli().code).toBe(2)
    expect(cli('train').err).toMatch(/train: --config is required/)
    expect(cli('fly').code).toBe(2)
    expect(cli('show').code).toBe(2)

    const badConfig = join(dir, 'bad.json')
    writeFileSync(badConfig, JSON.stringify({ model: { arch: 'mixtral', d_model: 30, n_heads: 4, n_kv_heads: 4 }, train: {} }))
    const bad = cli('train', '--config', badConfig)
    expect(bad.code).toBe(1)
    expect(bad.err).toContain(`${badConfig}: model.n_heads: must divide d_model (30)`)

    const badData = join(dir, 'bad.jsonl')
    writeFileSync(badData, '{"text": "ok"}\n{"prompt": 1, "completion": "x"}\n')
    const data = cli('train', '--config', configFile, '--data', badData, '--name', 'bad data')
    expect(data.code).toBe(1)
    expect(data.err).toBe(`moe-workbench: ${badData} line 2 field "prompt": is a number, expected a string\n`)
    expect(cli('runs').out).not.toContain('bad data')
  })

  it('serve prints a 127.0.0.1 URL with a token, answers with it and refuses without', async () => {
    const serve = startCli('serve', '--port', '0')
    try {
      const url = (await serve.waitFor(/Open (http:\/\/127\.0\.0\.1:\d+\/\?token=\S+)/))[1]!
      const { origin, searchParams } = new URL(url)
      const token = searchParams.get('token')!
      expect(token.length).toBeGreaterThanOrEqual(32)

      expect((await fetch(`${origin}/`)).status).toBe(401)
      expect((await fetch(`${origin}/?token=${'x'.repeat(token.length)}`, { redirect: 'manual' })).status).toBe(401)
      const signIn = await fetch(url, { redirect: 'manual' })
      expect(signIn.status).toBe(303)
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!
      const page = await fetch(`${origin}/`, { headers: { cookie } })
      expect(page.status).toBe(200)
      expect(await page.text()).toMatch(/<html/i)

      const socketUrl = `${origin.replace('http', 'ws')}/api`
      const refused = await new Promise<number>((resolve) => {
        const ws = new WebSocket(socketUrl)
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
        ws.on('open', () => resolve(101))
      })
      expect(refused).toBe(401)

      const ws = new WebSocket(`${socketUrl}?token=${encodeURIComponent(token)}`)
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject))
      const reply = await new Promise<{ id: number; result: { id: string; status: string }[] }>((resolve) => {
        ws.once('message', (data) => resolve(JSON.parse(data.toString())))
        ws.send(JSON.stringify({ id: 1, method: 'runs.list', params: {} }))
      })
      ws.close()
      expect(reply.result.find((r) => r.id === runId)).toMatchObject({ status: 'finished' })
    } finally {
      expect(await serve.interrupt()).toBe(0)
    }
  })

  it('resume continues a stopped run from its latest checkpoint', async () => {
    const first = startCli('train', '--config', configFile, '--steps', '100000', '--name', 'to resume')
    await first.waitFor(/checkpoint at step \d+/)
    expect(await first.interrupt()).toBe(1)
    const stopped = /run (\S+) stopped at step (\d+)\/100000; continue it with: moe-workbench resume \1/.exec(first.output.err)
    expect(stopped).not.toBeNull()
    const [, id, step] = stopped!
    const store = TelemetryStore.open(join(home, 'workbench.db'), { readonly: true })
    const lastCheckpoint = store.listCheckpoints(id!).at(-1)!.step
    store.close()
    expect(String(lastCheckpoint)).toBe(step)

    // The remainder is long: stop it again once it has trained a step.
    const resumed = startCli('resume', id!)
    await resumed.waitFor(/^step \d+\//m)
    expect(await resumed.interrupt()).toBe(1)
    expect(resumed.output.out).toContain(`run ${id} continues from step ${step}`)
    expect(resumed.output.out).toMatch(new RegExp(`engine started on the cpu backend: [\\d,]+ parameters, from step ${step}`))
  })

  it('demo --quick serves the UI, trains the tiny preset on the bundled corpus and keeps serving', async () => {
    const demo = startCli('demo', '--quick', '--steps', '1', '--port', '0')
    await demo.waitFor(/Ctrl-C to quit/)
    const { out } = demo.output
    const url = /Open (http:\/\/127\.0\.0\.1:\d+\/\?token=\S+)/.exec(out)![1]!
    expect(out).toMatch(/run (demo-\S+) \(mixtral L4 d256 8x top-2; resident · dropless · 2 threads\) on .*python-tutorial\.txt/)
    expect(out).toMatch(/run demo-\S+ finished: step 1\/1/)
    expect(out).toContain(`The workbench stays open at ${url}`)
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(303)
    expect(await demo.interrupt()).toBe(0)
  }, 120_000)

  it('demo trains the ablation set, prints Compare with it selected, and reuses finished runs on a second start', async () => {
    const first = startCli('demo', '--steps', '1', '--port', '0')
    await first.waitFor(/Ctrl-C to quit/)
    const out = first.output.out
    const keys = ['resident', 'host offload', 'ssd offload', 'static placement', 'least-loaded placement']
    const ids = keys.map((key, i) => new RegExp(`\\[${i + 1}/5\\] demo · ${key}: run (\\S+) queued`).exec(out)?.[1])
    expect(ids.every((id) => id !== undefined)).toBe(true)
    const url = /Open (http:\/\/127\.0\.0\.1:\d+\/\?token=\S+)/.exec(out)![1]!
    expect(out).toContain(`Compare the set at ${url}#/compare?ids=${ids.join(',')}`)
    for (const id of ids) expect(out).toMatch(new RegExp(`run ${id} finished: step 1/1`))
    expect(out).toContain('set: 5/5 trained, 5/5 steps')
    expect(await first.interrupt()).toBe(0)

    const second = startCli('demo', '--steps', '1', '--port', '0')
    await second.waitFor(/Ctrl-C to quit/)
    keys.forEach((key, i) => expect(second.output.out).toContain(`[${i + 1}/5] demo · ${key}: reusing finished run ${ids[i]} (--fresh trains it anew)`))
    expect(second.output.out).toContain(`#/compare?ids=${ids.join(',')}`)
    expect(second.output.out).not.toMatch(/queued/)
    expect(await second.interrupt()).toBe(0)
  }, 300_000)
})
