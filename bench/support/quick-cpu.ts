/**
 * A quick look while working on the hot path (not a benchmark: no baseline, no verdict): the platform's
 * CPU µs a request of `GET /v1/models` and of record creates and lists, under wrk/autocannon load.
 * `npx tsx bench/support/quick-cpu.ts [models|chat|creates|lists ...]` (QUICK_S seconds a run, 6). CPU a
 * request is steadier than requests a second on a shared machine. With QUICK_PROFILE_DIR=<dir> the
 * platform runs under --cpu-prof and the measured windows go to <dir>/quick-phases.json:
 * `npx tsx bench/support/profile-summary.ts <dir>/platform/<main thread>.cpuprofile <dir>/quick-phases.json chat`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir, runScript } from './processes.js';
import { startLocalPlatform } from './platform.js';
import { wrkLoad } from './wrk.js';
import { load } from './load.js';
import { startServer } from './processes.js';
import { randomUUID } from 'node:crypto';

const wanted = process.argv.slice(2);
/** With QUICK_PROFILE_DIR: each measured run's window and requests, for profile-summary.ts. */
const phases: { name: string; startUs: number; endUs: number; requests: number }[] = [];
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
async function measured<R extends { rps: number }>(name: string, run: () => Promise<R>): Promise<R> {
  const startUs = monotonicUs();
  const r = await run();
  const endUs = monotonicUs();
  phases.push({ name, startUs, endUs, requests: Math.round(r.rps * ((endUs - startUs) / 1e6)) });
  return r;
}
const want = (k: string) => !wanted.length || wanted.includes(k);
const seconds = Number(process.env.QUICK_S ?? 6);
const temp = makeTempDir('quick-cpu-');
const platform = await startLocalPlatform(temp.path, process.env.QUICK_PROFILE_DIR);
try {
  const auth = { authorization: `Bearer ${platform.credentials.secret_key}` };
  const line = (name: string, r: { rps: number; serverCpuUsPerRequest?: number; serverSysUsPerRequest?: number; othersBusy?: number }) =>
    console.log(`${name.padEnd(8)} ${Math.round(r.rps).toString().padStart(6)} req/s  ${r.serverCpuUsPerRequest?.toFixed(1)} µs CPU/req (${r.serverSysUsPerRequest?.toFixed(1)} kernel)  others ${((r.othersBusy ?? 0) * 100).toFixed(0)}%`);
  if (want('models')) {
    runScript('bin/admin.ts', ['route', 'set', '--org', platform.credentials.organization_id, '--id', 'fast-chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm', '--default'], { DATA_DIR: platform.dataDir, LOG_LEVEL: 'silent' });
    const url = `${platform.aiUrl}/v1/models`;
    await wrkLoad({ url, headers: auth, connections: 32, duration: 3, serverPgid: platform.server.pgid });
    for (let i = 0; i < 2; i++) line('models', await measured('models', () => wrkLoad({ url, headers: auth, connections: 32, duration: seconds, serverPgid: platform.server.pgid })));
  }
  if (want('chat')) {
    const upstream = await startServer('model upstream', 'bench/support/model-upstream.ts', {}, /upstream http:\S+\n/);
    try {
      const origin = /upstream (http:\S+)/.exec(upstream.output())![1];
      runScript('bin/admin.ts', ['route', 'set', '--org', platform.credentials.organization_id, '--id', 'bench-chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', `${origin}/v1`, '--model', 'bench-model'], { DATA_DIR: platform.dataDir, LOG_LEVEL: 'silent' });
      await new Promise((r) => setTimeout(r, 1200));
      const body = JSON.stringify({ model: 'bench-chat', messages: [{ role: 'user', content: 'Say hello.' }] });
      for (let i = 0; i < 3; i++) {
        const r = await measured(i ? 'chat' : 'warm-up', () => load({ url: `${platform.aiUrl}/v1/chat/completions`, method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body, setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'x-operation-id': `q-${randomUUID()}` } }), expectStatus: 200, connections: 50, duration: i === 0 ? 4 : seconds, serverPgid: platform.server.pgid }));
        if (i) line('chat', r);
      }
    } finally {
      await upstream.stop();
    }
  }
  if (want('creates') || want('lists')) {
    const db = `${platform.dataUrl}/v1/databases/bench`;
    const call = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(url, { method, headers: { ...auth, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
      return res.json();
    };
    await call('PUT', db);
    await call('PUT', `${db}/collections/items`, { fields: [{ name: 'sku', type: 'text', unique: true }, { name: 'n', type: 'integer', indexed: true }] });
    for (let s = 0; s < 4000; s += 33) await call('POST', `${db}/batch`, { ops: Array.from({ length: 33 }, (_, i) => ({ op: 'create', collection: 'items', data: { sku: `seed-${s + i}`, n: (s + i) % 200 } })) });
    const records = `${db}/collections/items/records`;
    let next = 0;
    if (want('creates')) {
      for (let i = 0; i < 3; i++) {
        const r = await measured(i ? 'creates' : 'warm-up', () => load({ url: records, method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, setupRequest: (req) => ({ ...req, body: `{"sku":"b-${next++}","n":${1_000_000 + (next % 1000)}}` }), expectStatus: 201, connections: 32, duration: i === 0 ? 3 : seconds, serverPgid: platform.server.pgid }));
        if (i) line('creates', r);
      }
    }
    if (want('lists')) {
      let n = 0;
      for (let i = 0; i < 3; i++) {
        const r = await measured(i ? 'lists' : 'warm-up', () => load({ url: records, headers: auth, setupRequest: (req) => ({ ...req, path: `${new URL(records).pathname}?filter[n]=${n++ % 200}&limit=20` }), expectStatus: 200, connections: 32, duration: i === 0 ? 3 : seconds, serverPgid: platform.server.pgid }));
        if (i) line('lists', r);
      }
    }
  }
} finally {
  await platform.server.stop();
  if (process.env.QUICK_PROFILE_DIR) writeFileSync(join(process.env.QUICK_PROFILE_DIR, 'quick-phases.json'), JSON.stringify(phases));
  temp.remove();
}
