/**
 * The curl examples of the Data and Events references (docs/data/reference.md,
 * docs/events/reference.md) and of the other Data docs (files, activity, tokens), run as written, top
 * to bottom, against the local platform. Each command is expanded by bash (its variables: the URLs,
 * the key, the workspace, the ids the text says to keep from earlier answers, and what the docs' own
 * shell lines set), then run by the real curl, whose own report (method, URL, status) is matched to
 * the route table: every command must name a route of its API with the right method, carry
 * `Authorization: Bearer` (but to the token route, which reads none), send JSON bodies as
 * `application/json`, pass `-g` where its URL holds brackets, and be answered as the text says; every
 * route a reference documents must have an example, and every Data route one in docs/data/.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docBlocks } from '../helpers/doc-blocks.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { acceptedCredentials, ROUTES, type RouteDef } from '../../lambdas/http/routes.js';
import { Router } from '../../lambdas/http/router.js';
import type { Api } from '../../lambdas/shared/api.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { runCommand } from '../../lambdas/admin/cli.js';

const run = promisify(execFile);

/** A receiver that is never called: no event is published after the webhook subscription is made. */
const WEBHOOK_URL = 'http://127.0.0.1:9/webhooks';

/** Where the docs' shell lines write their files (logo.txt, copy.txt) and curl reads them. */
const workDir = mkdtempSync(join(tmpdir(), 'doc-examples-'));

interface Ran {
  command: string;
  argv: string[];
  route: RouteDef;
  status: number;
  exitCode: number;
  body: any;
}

let p: TestPlatform;
const env: Record<string, string> = {};

beforeAll(async () => {
  useSettings({ eventsAllowLoopbackWebhooks: true });
  p = await startTestPlatform();
  // What docs/data/tokens.md has the admin CLI make, made by the same commands.
  const app = (await runCommand(p.engine, ['app', 'create', '--workspace', p.credentials.workspace_id, '--name', 'shop-web'])) as { id: string };
  const client = (await runCommand(p.engine, ['oauth-client', 'create', '--app', app.id])) as { client_id: string; client_secret: string };
  Object.assign(env, {
    DATA_URL: p.urls.data,
    EVENTS_URL: p.urls.events,
    KEY: p.credentials.secret_key,
    WORKSPACE_ID: p.credentials.workspace_id,
    APP_ID: app.id,
    CLIENT: JSON.stringify(client),
    CLIENT_ID: client.client_id,
    CLIENT_SECRET: client.client_secret,
  });
  for (const name of Object.keys(env)) PROVIDED.add(name);
});
afterAll(async () => {
  await p?.close();
  useSettings(undefined);
  rmSync(workDir, { recursive: true, force: true });
});

/**
 * The variables the test sets from the platform it started: a doc line assigning one of them is the
 * reader's setup (reading .platform/credentials.json, the admin CLI) and is not run.
 */
const PROVIDED = new Set<string>();

/** Whether `lines` end a shell command: no quote left open, no trailing backslash (comments, `# …` outside quotes, are skipped). */
function complete(lines: string[]): boolean {
  let quote: string | undefined;
  let last = '';
  for (const line of lines) {
    last = '';
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (quote === '"' && c === '\\') i++;
      else if (quote) quote = c === quote ? undefined : quote;
      else if (c === "'" || c === '"') quote = c;
      else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) break;
      last = c;
    }
  }
  return quote === undefined && last !== '\\';
}

/** The commands of a doc's shell blocks in order: a line that is not a comment or blank, with the lines that continue it (after a backslash, inside a quote). */
function shellCommands(doc: string): string[] {
  const commands: string[] = [];
  for (const block of docBlocks(doc, ['sh', 'bash'])) {
    let open: string[] | undefined;
    for (const line of block.split('\n')) {
      if (!open && (line.startsWith('#') || line.trim() === '')) continue;
      (open ??= []).push(line);
      if (complete(open)) {
        commands.push(open.join('\n'));
        open = undefined;
      }
    }
    expect(open, `${doc}: a command left open at the end of its block`).toBeUndefined();
  }
  return commands;
}

/** Runs a doc's shell line that is not curl (making a file, computing its SHA-256) in bash; the variables it sets carry on. */
async function runShell(command: string): Promise<void> {
  const assigned = /^([A-Z_][A-Z0-9_]*)=/.exec(command)?.[1];
  if (assigned && PROVIDED.has(assigned)) return;
  const before = { ...process.env, ...env };
  // The line's own status decides (`cmp a b && echo same` fails as a whole), then its variables are read.
  const { stdout } = await run('bash', ['-c', `set -a\n${command}\ns=$?\n[ $s = 0 ] && env -0\nexit $s`], { cwd: workDir, env: before }).catch((e: { stderr: string }) => {
    throw new Error(`${command}\nfailed: ${e.stderr}`);
  });
  for (const entry of stdout.split('\0').slice(0, -1)) {
    const [name, ...value] = entry.split('=');
    if (before[name] !== value.join('=') && /^[A-Z_][A-Z0-9_]*$/.test(name)) env[name] = value.join('=');
  }
}

/** The arguments bash gives curl for `command` (its quoting and variables resolved), without running it. */
async function argvOf(command: string): Promise<string[]> {
  const { stdout } = await run('bash', ['-c', `args() { printf '%s\\0' "$@"; }; args${command.slice('curl'.length)}`], { cwd: workDir, env: { ...process.env, ...env } });
  return stdout.split('\0').slice(0, -1);
}

const routers = new Map<Api, Router>((['data', 'events'] as const).map((api) => [api, new Router(api, ROUTES)]));

/** Runs the command's curl; curl's own report says which method and URL it used. */
async function runCurl(command: string): Promise<Ran> {
  const argv = await argvOf(command);
  // Without -g curl reads brackets as its own URL globbing and refuses the URL.
  const given = argv.find((a) => /^https?:\/\//.test(a)) ?? '';
  if (/[[\]{}]/.test(given)) expect(hasFlag(argv, 'g', '--globoff'), `${command}\nbrackets in the URL need -g`).toBe(true);
  const write = ['--write-out', '%{stderr}\n@@%{json}'];
  const { stdout, stderr, exitCode } = await run('curl', [...argv, ...write], { cwd: workDir, encoding: 'utf8', maxBuffer: 1 << 24 }).then(
    (r) => ({ ...r, exitCode: 0 }),
    (e: { stdout: string; stderr: string; code: number }) => ({ stdout: e.stdout, stderr: e.stderr, exitCode: e.code }),
  );
  const report = JSON.parse(stderr.slice(stderr.lastIndexOf('@@') + 2));
  const url = new URL(report.url_effective);
  const api = (['data', 'events'] as const).find((a) => url.origin === new URL(p.urls[a]).origin);
  expect(api, `${command}\nnames neither the Data nor the Events URL`).toBeDefined();
  const { route } = routers.get(api!)!.match(report.method, url.pathname);
  const text = stdout.includes('\r\n\r\n') ? stdout.slice(stdout.lastIndexOf('\r\n\r\n') + 4) : stdout;
  let body: any = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: a 204, a 304, the stream's frames
  }
  return { command, argv, route, status: report.http_code, exitCode, body };
}

const headerValues = (argv: string[]) => argv.flatMap((a, i) => (a === '-H' || a === '--header' ? [argv[i + 1].toLowerCase()] : []));
const hasFlag = (argv: string[], short: string, long: string) =>
  argv.some((a) => a === long || (/^-[a-zA-Z]+$/.test(a) && a.includes(short)));

/** Runs a doc's examples in order, carrying the ids its text says to keep, and checks each as the header says. */
async function runDoc(doc: string, expectedStatus: (route: RouteDef) => number[]): Promise<Ran[]> {
  const commands = shellCommands(doc);
  expect(commands.filter((c) => c.startsWith('curl ')).length, `curl examples in ${doc}`).toBeGreaterThan(0);
  const ran: Ran[] = [];
  for (const command of commands) {
    if (!command.startsWith('curl ')) {
      await runShell(command);
      continue;
    }
    const r = await runCurl(command.replace('https://example.com/webhooks', WEBHOOK_URL));
    const what = `${doc}:\n${command}\n→ ${r.status} ${JSON.stringify(r.body)?.slice(0, 300)}`;
    expect(r.route.path, `${what}\nnames no route of the route table`).not.toBe('$default');
    // The token route reads no bearer credential: the OAuth client authenticates itself.
    const bearer = acceptedCredentials(r.route) !== 'none';
    expect(headerValues(r.argv).some((h) => /^authorization: bearer \S+$/.test(h)), `${what}\nAuthorization: Bearer ${bearer ? 'missing' : 'where none is read'}`).toBe(bearer);
    expect(headerValues(r.argv).some((h) => h.startsWith('x-operation-id')), `${what}\nData and Events take no X-Operation-Id`).toBe(false);
    // A raw body route (the token route's form) takes curl's own form content type.
    if (r.route.body !== 'raw' && r.argv.some((a) => /^(-d|--data(-raw|-binary)?)$/.test(a))) {
      expect(headerValues(r.argv), `${what}\na JSON body without its content type`).toContain('content-type: application/json');
    }
    expect(expectedStatus(r.route), what).toContain(r.status);
    // curl ends a stream only at --max-time (exit 28); every other command completes.
    expect(r.exitCode, what).toBe(r.route.id === 'events.subscriptions.stream' ? 28 : 0);
    // The ids the text says to keep, as a reader would.
    if (r.route.id === 'events.subscriptions.create') env.SUBSCRIPTION_ID = r.body.subscription_id;
    if (r.route.id === 'events.events.publish') env.EVENT_ID = r.body.accepted[0].event_id;
    if (['data.records.list', 'data.activity.list'].includes(r.route.id) && r.body.next_cursor) env.NEXT_CURSOR = encodeURIComponent(r.body.next_cursor);
    if (r.route.id === 'data.uploads.create') env.UPLOAD_ID = r.body.upload_id;
    if (r.route.id === 'data.uploads.part') env.ETAG = r.body.etag;
    if (r.route.id === 'data.oauth.token') env.ACCESS_TOKEN = r.body.access_token;
    ran.push(r);
  }
  return ran;
}

const ok = [200, 201, 202, 204];

/** The Data routes every example in docs/data/ has named, across the tests below (they run in order). */
const dataRoutesShown = new Set<string>();

describe('curl examples of the references, run as written', () => {
  it('Data: databases, collections, records, batch', async () => {
    const ran = await runDoc('docs/data/reference.md', (route) => (route.id === 'data.records.get' ? [200, 304] : ok));
    for (const r of ran) dataRoutesShown.add(r.route.id);
    // The reference documents every route of databases, collections, records and batch.
    const documented = ROUTES.filter((r) => r.api === 'data' && /^\/v1\/databases(\/\{database\}(\/collections\/.*|\/batch)?)?$/.test(r.path)).map((r) => r.id);
    expect(new Set(ran.map((r) => r.route.id))).toEqual(new Set(documented));
    // The conditional GET and the next page did what their comments say.
    expect(ran.filter((r) => r.route.id === 'data.records.get').map((r) => r.status)).toEqual([200, 304]);
    const pages = ran.filter((r) => r.route.id === 'data.records.list' && r.argv.some((a) => a.includes('filter[')));
    expect(pages.map((r) => r.body.records.map((x: { name: string }) => x.name))).toEqual([['Desk pad'], ['Mug']]);
  });

  it('Events: every workspace route', async () => {
    const ran = await runDoc('docs/events/reference.md', (route) =>
      route.id === 'events.dead.replay' ? [404] : route.id === 'events.subscriptions.stream' ? [101] : ok,
    );
    const documented = ROUTES.filter((r) => r.api === 'events' && r.path.startsWith('/v1/workspaces/')).map((r) => r.id);
    expect(new Set(ran.map((r) => r.route.id))).toEqual(new Set(documented));
    expect(ran.find((r) => r.route.id === 'events.subscriptions.ack')!.body.acked).toBe(1);
    expect(ran.find((r) => r.route.id === 'events.dead.replay')!.body.error.code).toBe('dead_event_not_found');
  }, 30_000);

  it('Data: files, multipart uploads', async () => {
    const ran = await runDoc('docs/data/blobs.md', () => ok);
    for (const r of ran) dataRoutesShown.add(r.route.id);
    // What the text says each answered.
    const status = (id: string) => ran.filter((r) => r.route.id === id).map((r) => r.status);
    expect(status('data.blobs.put')).toEqual([201]);
    expect([...status('data.blobs.head'), ...status('data.blobs.get')]).toEqual([200, 200]);
    expect(status('data.blobs.delete')).toEqual([204]);
    expect(status('data.uploads.create')).toEqual([201, 201]);
    expect(ran.find((r) => r.route.id === 'data.uploads.complete')!.body).toEqual({ sha256: env.SHA, size: 33 });
    expect(status('data.uploads.abort')).toEqual([204]);
  });

  it('Data: the activity log (after the files examples, whose SHA it reads)', async () => {
    const ran = await runDoc('docs/data/activity.md', () => ok);
    for (const r of ran) dataRoutesShown.add(r.route.id);
    const [first, next, writes, file] = ran.map((r) => r.body.items as { id: string; kind: string }[]);
    expect(first).toHaveLength(2);
    expect(next.map((e) => e.id)).not.toContain(first[0].id);
    expect(writes.map((e) => e.kind)).toContain('blob.write');
    expect(writes.every((e) => ['record.write', 'blob.write'].includes(e.kind))).toBe(true);
    expect(file.map((e) => e.kind)).toContain('blob.read');
  });

  it('Data: the OAuth token and end-user tokens', async () => {
    const ran = await runDoc('docs/data/tokens.md', () => ok);
    for (const r of ran) dataRoutesShown.add(r.route.id);
    expect(ran.find((r) => r.route.id === 'data.oauth.token')!.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    expect(ran.find((r) => r.route.id === 'data.end_user_tokens.create')!.body.token).toMatch(/^eyJ/);
  });

  it('every Data route but the preflight and the fallback has an example in docs/data/', () => {
    const routes = ROUTES.filter((r) => r.api === 'data' && r.method !== 'OPTIONS' && r.path !== '$default').map((r) => r.id);
    expect([...dataRoutesShown].sort()).toEqual(routes.sort());
  });
});
