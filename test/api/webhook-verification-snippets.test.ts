/**
 * The receiver guide's verification snippets (docs/events/verifying-webhooks.md: Node, Python, Go),
 * each run as written against a webhook the local platform really delivered: a subscription to a
 * receiver on loopback, a publish, the request captured as it arrived (headers and raw body), then
 * fed to each language's check. The genuine request passes; a tampered body, another secret, a
 * timestamp older or newer than 5 minutes fail. A second delivery after a rotation carries two
 * signatures, and either secret passes. python3 and go come from Debian (installed here when
 * missing, as CI starts from a clean machine).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callApi, ok } from '../helpers/data-api.js';
import { docBlocks } from '../helpers/doc-blocks.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { useSettings } from '../../lambdas/shared/settings.js';

const GUIDE = 'docs/events/verifying-webhooks.md';
const PYTHON = '/usr/bin/python3';
const GO = '/usr/bin/go';

interface Delivery {
  headers: Record<string, string>;
  body: Buffer;
}
/** One question to every snippet: is this request genuine for these secrets at `now` (Unix seconds; null: the snippet's own clock)? */
interface Case {
  name: string;
  secrets: string[];
  headers: Record<string, string>;
  body: Buffer;
  now: number | null;
  genuine: boolean;
}

/** The one block of the guide in `language` that starts with its `verify-snippet` marker. */
function snippet(language: string, comment: string): string {
  const blocks = docBlocks(GUIDE, [language]).filter((code) => code.startsWith(`${comment} verify-snippet\n`));
  expect(blocks, `one ${language} verify-snippet block`).toHaveLength(1);
  return blocks[0];
}

function ensureDebianPackage(program: string, pkg: string): void {
  execFileSync('bash', ['scripts/ensure-debian-package.sh', program, pkg], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000 });
}

/** Runs a program with `input` on stdin; its stdout, or a rejection with its stderr. */
function run(command: string, args: string[], input: string, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${err}`))));
    child.stdin.end(input);
  });
}

/** The cases as the language drivers read them: the body in base64, so its bytes arrive untouched. */
const wire = (cases: Case[]) =>
  JSON.stringify(cases.map((c) => ({ secrets: c.secrets, headers: c.headers, body: c.body.toString('base64'), now: c.now })));

const PYTHON_DRIVER = `import base64, json, sys
from verify import verify_webhook
cases = json.load(sys.stdin)
print(json.dumps([verify_webhook(c["secrets"], c["headers"], base64.b64decode(c["body"]), c["now"]) for c in cases]))
`;

const GO_DRIVER = `package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	var cases []struct {
		Secrets []string          \`json:"secrets"\`
		Headers map[string]string \`json:"headers"\`
		Body    string            \`json:"body"\`
		Now     *int64            \`json:"now"\`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	answers := []bool{}
	for _, c := range cases {
		header := http.Header{}
		for k, v := range c.Headers {
			header.Set(k, v)
		}
		body, err := base64.StdEncoding.DecodeString(c.Body)
		if err != nil {
			panic(err)
		}
		now := time.Now()
		if c.Now != nil {
			now = time.Unix(*c.Now, 0)
		}
		answers = append(answers, VerifyWebhook(c.Secrets, header, body, now))
	}
	out, _ := json.Marshal(answers)
	fmt.Println(string(out))
}
`;

let p: TestPlatform;
let receiver: http.Server;
let receiverUrl: string;
let dir: string;
const deliveries: Delivery[] = [];
let cases: Case[];

async function nextDelivery(count: number): Promise<Delivery> {
  const until = Date.now() + 10_000;
  while (deliveries.length < count) {
    if (Date.now() > until) throw new Error('no webhook delivered within 10 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  return deliveries[count - 1];
}

beforeAll(async () => {
  ensureDebianPackage(PYTHON, 'python3');
  ensureDebianPackage(GO, 'golang-go');
  dir = mkdtempSync(join(tmpdir(), 'verify-snippets-'));

  useSettings({ eventsAllowLoopbackWebhooks: true });
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      deliveries.push({ headers: req.headers as Record<string, string>, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks`;
  p = await startTestPlatform();

  const call = (method: string, path: string, body?: unknown) =>
    callApi(p.urls.events, bearer(p.credentials.secret_key), method, `/v1/workspaces/${p.credentials.workspace_id}${path}`, body);
  const sub = await ok(call('POST', '/subscriptions', { types: ['order.*'], delivery: { mode: 'webhook', url: receiverUrl } }), 201);
  const first = sub.signing_secret as string;
  await ok(call('POST', '/events', { event: { type: 'order.paid', data: { order: 'ord_1', total: 12.5, note: 'é ✓ "quoted"' } } }), 202);
  const plain = await nextDelivery(1);
  const rotated = await ok(call('POST', `/subscriptions/${sub.subscription_id}/rotate-secret`), 200);
  const second = rotated.signing_secret as string;
  await ok(call('POST', '/events', { event: { type: 'order.shipped', data: { order: 'ord_1' } } }), 202);
  const twice = await nextDelivery(2);
  expect(twice.headers['x-event-signature'].split(',')).toHaveLength(2);

  const ts = Number(plain.headers['x-event-timestamp']);
  const tampered = Buffer.from(plain.body.toString('utf8').replace('12.5', '1.25'), 'utf8');
  const { 'x-event-signature': _, ...unsigned } = plain.headers;
  const other = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
  cases = [
    { name: 'the delivery, on the snippet own clock', secrets: [first], headers: plain.headers, body: plain.body, now: null, genuine: true },
    { name: 'the delivery, 300 s later', secrets: [first], headers: plain.headers, body: plain.body, now: ts + 300, genuine: true },
    { name: 'the delivery, with the secret second in a list', secrets: [other, first], headers: plain.headers, body: plain.body, now: ts, genuine: true },
    { name: 'a tampered body', secrets: [first], headers: plain.headers, body: tampered, now: ts, genuine: false },
    { name: 'another secret', secrets: [other], headers: plain.headers, body: plain.body, now: ts, genuine: false },
    { name: 'an old timestamp (301 s ago)', secrets: [first], headers: plain.headers, body: plain.body, now: ts + 301, genuine: false },
    { name: 'a timestamp 301 s ahead', secrets: [first], headers: plain.headers, body: plain.body, now: ts - 301, genuine: false },
    { name: 'no signature', secrets: [first], headers: unsigned, body: plain.body, now: ts, genuine: false },
    { name: 'a rotated delivery, new secret', secrets: [second], headers: twice.headers, body: twice.body, now: null, genuine: true },
    { name: 'a rotated delivery, previous secret', secrets: [first], headers: twice.headers, body: twice.body, now: null, genuine: true },
    { name: 'a rotated delivery, tampered', secrets: [second], headers: twice.headers, body: Buffer.concat([twice.body, Buffer.from(' ')]), now: null, genuine: false },
  ];
}, 600_000);

afterAll(async () => {
  await p?.close();
  if (receiver) await new Promise((r) => receiver.close(r));
  useSettings(undefined);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const expected = () => Object.fromEntries(cases.map((c) => [c.name, c.genuine]));
const answered = (answers: boolean[]) => Object.fromEntries(cases.map((c, i) => [c.name, answers[i]]));

describe('webhook verification snippets against a real delivery', () => {
  it('Node (verifyWebhook)', async () => {
    const file = join(dir, 'verify.mjs');
    writeFileSync(file, snippet('js', '//'));
    const { verifyWebhook } = (await import(/* @vite-ignore */ pathToFileURL(file).href)) as {
      verifyWebhook(secrets: string[], headers: Record<string, string>, rawBody: Buffer, nowMs?: number): boolean;
    };
    expect(answered(cases.map((c) => verifyWebhook(c.secrets, c.headers, c.body, c.now === null ? undefined : c.now * 1000)))).toEqual(expected());
  });

  it('Python (verify_webhook)', async () => {
    writeFileSync(join(dir, 'verify.py'), snippet('python', '#'));
    writeFileSync(join(dir, 'driver.py'), PYTHON_DRIVER);
    expect(answered(JSON.parse(await run(PYTHON, ['driver.py'], wire(cases), dir)))).toEqual(expected());
  });

  it('Go (VerifyWebhook)', async () => {
    const code = snippet('go', '//');
    // The guide's package is the receiver's own; here it joins the driver's main package.
    expect(code).toMatch(/^package webhooks$/m);
    writeFileSync(join(dir, 'verify.go'), code.replace(/^package webhooks$/m, 'package main'));
    writeFileSync(join(dir, 'main.go'), GO_DRIVER);
    expect(answered(JSON.parse(await run(GO, ['run', 'verify.go', 'main.go'], wire(cases), dir)))).toEqual(expected());
  }, 180_000);
});
