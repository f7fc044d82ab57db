/**
 * The curl examples of the Data and Events references (docs/data/reference.md,
 * docs/events/reference.md), run as written, top to bottom, against the local platform. Each command
 * is expanded by bash (its variables: the URLs, the key, the workspace, and the ids the text says to
 * keep from earlier answers), then run by the real curl, whose own report (method, URL, status) is
 * matched to the route table: every command must name a route of its API with the right method, carry
 * `Authorization: Bearer`, send JSON bodies as `application/json`, pass `-g` where its URL holds
 * brackets, and be answered as the text says; every route a reference documents must have an example.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docBlocks } from '../helpers/doc-blocks.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { ROUTES, type RouteDef } from '../../lambdas/http/routes.js';
import { Router } from '../../lambdas/http/router.js';
import type { Api } from '../../lambdas/shared/api.js';
import { useSettings } from '../../lambdas/shared/settings.js';

const run = promisify(execFile);

/** A receiver that is never called: no event is published after the webhook subscription is made. */
const WEBHOOK_URL = 'http://127.0.0.1:9/webhooks';

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
  Object.assign(env, {
    DATA_URL: p.urls.data,
    EVENTS_URL: p.urls.events,
    KEY: p.credentials.secret_key,
    WORKSPACE_ID: p.credentials.workspace_id,
  });
});
afterAll(async () => {
  await p?.close();
  useSettings(undefined);
});

/** The curl commands of a doc's shell blocks in order: a command is a line starting `curl ` and the lines after it up to the next command or comment. */
function curlCommands(doc: string): string[] {
  const commands: string[] = [];
  for (const block of docBlocks(doc, ['sh', 'bash'])) {
    let current: string[] | undefined;
    for (const line of block.split('\n')) {
      if (line.startsWith('curl ')) commands.push((current = [line]).join('\n'));
      else if (line.startsWith('#') || line.trim() === '') current = undefined;
      else if (current) {
        current.push(line);
        commands[commands.length - 1] = current.join('\n');
      }
    }
  }
  return commands;
}

/** The arguments bash gives curl for `command` (its quoting and variables resolved), without running it. */
async function argvOf(command: string): Promise<string[]> {
  const { stdout } = await run('bash', ['-c', `args() { printf '%s\\0' "$@"; }; args${command.slice('curl'.length)}`], { env: { ...process.env, ...env } });
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
  const { stdout, stderr, exitCode } = await run('curl', [...argv, ...write], { encoding: 'utf8', maxBuffer: 1 << 24 }).then(
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
  const commands = curlCommands(doc);
  expect(commands.length, `curl examples in ${doc}`).toBeGreaterThan(0);
  const ran: Ran[] = [];
  for (const command of commands) {
    const r = await runCurl(command.replace('https://example.com/webhooks', WEBHOOK_URL));
    const what = `${doc}:\n${command}\n→ ${r.status} ${JSON.stringify(r.body)?.slice(0, 300)}`;
    expect(r.route.path, `${what}\nnames no route of the route table`).not.toBe('$default');
    expect(headerValues(r.argv).some((h) => /^authorization: bearer \S+$/.test(h)), `${what}\nwithout Authorization: Bearer`).toBe(true);
    expect(headerValues(r.argv).some((h) => h.startsWith('x-operation-id')), `${what}\nData and Events take no X-Operation-Id`).toBe(false);
    if (r.argv.some((a) => /^(-d|--data(-raw|-binary)?)$/.test(a))) {
      expect(headerValues(r.argv), `${what}\na JSON body without its content type`).toContain('content-type: application/json');
    }
    expect(expectedStatus(r.route), what).toContain(r.status);
    // curl ends a stream only at --max-time (exit 28); every other command completes.
    expect(r.exitCode, what).toBe(r.route.id === 'events.subscriptions.stream' ? 28 : 0);
    // The ids the text says to keep, as a reader would.
    if (r.route.id === 'events.subscriptions.create') env.SUBSCRIPTION_ID = r.body.subscription_id;
    if (r.route.id === 'events.events.publish') env.EVENT_ID = r.body.accepted[0].event_id;
    if (r.route.id === 'data.records.list' && r.body.next_cursor) env.NEXT_CURSOR = encodeURIComponent(r.body.next_cursor);
    ran.push(r);
  }
  return ran;
}

const ok = [200, 201, 202, 204];

describe('curl examples of the references, run as written', () => {
  it('Data: databases, collections, records, batch', async () => {
    const ran = await runDoc('docs/data/reference.md', (route) => (route.id === 'data.records.get' ? [200, 304] : ok));
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
});
