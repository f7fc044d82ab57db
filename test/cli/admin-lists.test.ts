/**
 * The admin CLI's lists (`org list`, `workspace list`, `app list`, `key list`, `oauth-client list`,
 * `publishable-key list`) and the revocations beside them (`app disable|enable`,
 * `publishable-key set-origins`), run as an operator runs them: the real CLI on a fresh embedded
 * store (a temp DATA_DIR) and, through the same domain code and engine ports, on AWS (dynalite and
 * s3rver as `ENGINE=aws` meets them). Then what a running server makes of the revocations.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admin, adminOk, adminOn, type CliResult } from '../helpers/cli.js';
import { startAwsEmulators, type AwsEmulators } from '../helpers/aws-emulators.js';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { hashSecret } from '../../lambdas/auth/secret-keys.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useSettings } from '../../lambdas/shared/settings.js';

type Cli = (...args: string[]) => Promise<CliResult>;

/** Runs the lists on one store, fresh: every list holds exactly what the scenario made. */
function listScenario(cli: Cli) {
  const ok = async (...args: string[]) => {
    const r = await cli(...args);
    if (r.status !== 0) throw new Error(`admin ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return r.json;
  };
  /** Every page of a list at `limit` a page, following next_cursor to its end. */
  const walk = async (args: string[], limit: number) => {
    const all: any[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 50; pages++) {
      const page = await ok(...args, '--limit', String(limit), ...(cursor ? ['--cursor', cursor] : []));
      expect(page.data.length).toBeLessThanOrEqual(limit);
      all.push(...page.data);
      cursor = page.next_cursor;
      if (cursor === null) return all;
    }
    throw new Error('the list never ended');
  };
  const ids = (list: { id?: string; client_id?: string }[]) => list.map((x) => x.id ?? x.client_id);
  const secrets: string[] = [];
  const printed: unknown[] = [];
  const shown = <T>(x: T): T => (printed.push(x), x);

  it('org list: every organization, oldest first, a page at a time', async () => {
    const orgs = [];
    for (const name of ['L1', 'L2', 'L3']) orgs.push(await ok('org', 'create', '--name', name));
    expect(shown(await ok('org', 'list'))).toEqual({ data: orgs, next_cursor: null });
    expect(await walk(['org', 'list'], 2)).toEqual(orgs);
    // A change shows in the list.
    await ok('org', 'disable', '--org', orgs[1].id);
    expect((await ok('org', 'list')).data.map((o: { disabled: boolean }) => o.disabled)).toEqual([false, true, false]);
  });

  let org: string;
  let other: string;
  let wsA: string;
  let wsB: string;
  let a1: string;
  let a2: string;
  let b1: string;
  it('workspace list --org and app list --workspace: only that organization\'s, only that workspace\'s', async () => {
    [org, other] = (await ok('org', 'list')).data.map((o: { id: string }) => o.id);
    wsA = (await ok('workspace', 'create', '--org', org, '--name', 'A')).id;
    const elsewhere = (await ok('workspace', 'create', '--org', other, '--name', 'C')).id;
    wsB = (await ok('workspace', 'create', '--org', org, '--name', 'B')).id;
    expect(ids(shown(await ok('workspace', 'list', '--org', org)).data)).toEqual([wsA, wsB]);
    expect(ids(await walk(['workspace', 'list', '--org', org], 1))).toEqual([wsA, wsB]);
    expect(ids((await ok('workspace', 'list', '--org', other)).data)).toEqual([elsewhere]);

    a1 = (await ok('app', 'create', '--workspace', wsA, '--name', 'a1', '--capabilities', 'ai.chat')).id;
    b1 = (await ok('app', 'create', '--workspace', wsB, '--name', 'b1')).id;
    a2 = (await ok('app', 'create', '--workspace', wsA, '--name', 'a2')).id;
    const listed = shown(await ok('app', 'list', '--workspace', wsA));
    expect(listed).toEqual({ data: [expect.objectContaining({ id: a1, workspace_id: wsA, name: 'a1', capabilities: ['ai.chat'], disabled: false }), expect.objectContaining({ id: a2 })], next_cursor: null });
    // Pages of one, read from the organization's applications (b1 among them, kept out).
    expect(ids(await walk(['app', 'list', '--workspace', wsA], 1))).toEqual([a1, a2]);
    expect(ids((await ok('app', 'list', '--workspace', wsB)).data)).toEqual([b1]);
  });

  it('app disable | enable: the application record, in the list too', async () => {
    expect(shown(await ok('app', 'disable', '--app', a2))).toMatchObject({ id: a2, disabled: true });
    expect((await ok('app', 'list', '--workspace', wsA)).data.map((a: { disabled: boolean }) => a.disabled)).toEqual([false, true]);
    expect(await ok('app', 'enable', '--app', a2)).toMatchObject({ id: a2, disabled: false });
  });

  it("key list --org [--app]: ids, last 4 characters, state, permissions, limits and routes; never a secret nor its hash", async () => {
    const wide = await ok('key', 'create', '--org', org);
    const bound = await ok('key', 'create', '--org', org, '--app', a1, '--permissions', 'events:event.publish');
    const gone = await ok('key', 'create', '--org', org, '--app', b1);
    secrets.push(wide.key, bound.key, gone.key);
    await ok('key', 'limits', '--key-id', bound.id, '--rpm', '60', '--budget-usd', '5');
    await ok('key', 'routes', '--key-id', bound.id, '--routes', 'chat');
    await ok('key', 'disable', '--key-id', gone.id);
    const none = { rpm: null, tpm: null, concurrency: null, budget_usd: null };
    const listed = shown(await ok('key', 'list', '--org', org));
    expect(listed).toEqual({
      data: [
        { id: wide.id, organization_id: org, application_id: null, last4: wide.key.slice(-4), disabled: false, permissions: null, created_at: expect.any(String), limits: none, routes: null },
        { id: bound.id, organization_id: org, application_id: a1, last4: bound.key.slice(-4), disabled: false, permissions: ['events:event.publish'], created_at: expect.any(String), limits: { ...none, rpm: 60, budget_usd: 5 }, routes: ['chat'] },
        { id: gone.id, organization_id: org, application_id: b1, last4: gone.key.slice(-4), disabled: true, permissions: null, created_at: expect.any(String), limits: none, routes: null },
      ],
      next_cursor: null,
    });
    expect(ids(shown(await ok('key', 'list', '--org', org, '--app', a1)).data)).toEqual([bound.id]);
    expect(ids(await walk(['key', 'list', '--org', org, '--app', b1], 1))).toEqual([gone.id]);
    expect(await ok('key', 'list', '--org', other)).toEqual({ data: [], next_cursor: null });
  });

  it('oauth-client list --app: the clients with their state; never a secret nor its hash', async () => {
    const c1 = await ok('oauth-client', 'create', '--app', a1);
    const c2 = await ok('oauth-client', 'create', '--app', a1, '--permissions', 'events:stats.read');
    const c3 = await ok('oauth-client', 'create', '--app', b1);
    secrets.push(c1.client_secret, c2.client_secret, c3.client_secret);
    await ok('oauth-client', 'revoke', '--client-id', c2.client_id);
    expect(shown(await ok('oauth-client', 'list', '--app', a1))).toEqual({
      data: [
        { client_id: c1.client_id, application_id: a1, organization_id: org, revoked: false, permissions: null, created_at: expect.any(String) },
        { client_id: c2.client_id, application_id: a1, organization_id: org, revoked: true, permissions: ['events:stats.read'], created_at: expect.any(String) },
      ],
      next_cursor: null,
    });
    expect(ids((await ok('oauth-client', 'list', '--app', b1)).data)).toEqual([c3.client_id]);
  });

  it('publishable-key list --app and set-origins: the keys with their origins and last 4 characters; the new list replaces the old', async () => {
    const p1 = await ok('publishable-key', 'create', '--app', a1, '--origins', 'https://one.example');
    const p2 = await ok('publishable-key', 'create', '--app', a1, '--origins', 'https://two.example');
    const p3 = await ok('publishable-key', 'create', '--app', b1, '--origins', 'https://three.example');
    secrets.push(p1.key, p2.key, p3.key);
    const set = shown(await ok('publishable-key', 'set-origins', '--key-id', p1.id, '--origins', 'https://new.example/, https://one.example,https://new.example'));
    expect(set).toMatchObject({ id: p1.id, origins: ['https://new.example', 'https://one.example'], disabled: false });
    await ok('publishable-key', 'disable', '--key-id', p2.id);
    expect(shown(await ok('publishable-key', 'list', '--app', a1))).toEqual({
      data: [
        { id: p1.id, application_id: a1, organization_id: org, workspace_id: wsA, origins: ['https://new.example', 'https://one.example'], disabled: false, last4: p1.key.slice(-4), created_at: expect.any(String) },
        { id: p2.id, application_id: a1, organization_id: org, workspace_id: wsA, origins: ['https://two.example'], disabled: true, last4: p2.key.slice(-4), created_at: expect.any(String) },
      ],
      next_cursor: null,
    });
    expect(ids((await ok('publishable-key', 'list', '--app', b1)).data)).toEqual([p3.id]);
    // A disabled key's origins change too (it stays out of the preflight index).
    expect(await ok('publishable-key', 'set-origins', '--key-id', p2.id, '--origins', 'https://later.example')).toMatchObject({ origins: ['https://later.example'], disabled: true });
  });

  it('nothing printed holds a secret, its hash or a storage key', async () => {
    const text = JSON.stringify(printed);
    expect(secrets).toHaveLength(9);
    for (const secret of secrets) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(hashSecret(secret));
    }
    expect(text).not.toMatch(/secret_hash|"hash"|gsi1|"pk"|"sk"/);
  });

  it('refuses bad paging and unknown records: usage errors exit 2, the rest 1, naming what is wrong', async () => {
    const cases: [string[], number, RegExp][] = [
      [['org', 'list', '--limit', '0'], 2, /--limit takes a whole number from 1 to 100/],
      [['org', 'list', '--limit', '101'], 2, /--limit takes a whole number from 1 to 100/],
      [['org', 'list', '--limit', 'ten'], 2, /--limit takes a number/],
      // Number() would read these as 16, 100 and 5.
      [['org', 'list', '--limit', '0x10'], 2, /--limit takes a number, got "0x10"/],
      [['org', 'list', '--limit', '1e2'], 2, /--limit takes a number, got "1e2"/],
      [['org', 'list', '--limit', ' 5'], 2, /--limit takes a number, got " 5"/],
      [['key', 'list', '--org', org, '--cursor', 'not-a-cursor'], 1, /cursor: not one this list gave/],
      [['workspace', 'list', '--org', 'org_missing'], 1, /no organization org_missing/],
      [['app', 'list', '--workspace', 'ws_missing'], 1, /no workspace ws_missing/],
      [['key', 'list', '--org', other, '--app', a1], 1, new RegExp(`no application ${a1} in ${other}`)],
      [['oauth-client', 'list', '--app', 'app_missing'], 1, /no application app_missing/],
      [['publishable-key', 'list', '--app', 'app_missing'], 1, /no application app_missing/],
      [['app', 'disable', '--app', 'app_missing'], 1, /no application app_missing/],
      [['publishable-key', 'set-origins', '--key-id', 'pbk_missing', '--origins', 'https://a.example'], 1, /no publishable key pbk_missing/],
      [['app', 'list'], 2, /missing --workspace/],
    ];
    // A cursor of one organization's list given to another's (a copy-paste slip): refused, not read as a
    // position in the other's, which skipped its entries silently on the embedded engine.
    const foreign = (await ok('workspace', 'list', '--org', org, '--limit', '1')).next_cursor;
    cases.push([['workspace', 'list', '--org', other, '--cursor', foreign], 1, /cursor: not one this list gave/]);
    for (const [args, status, message] of cases) {
      const r = await cli(...args);
      expect([r.status, r.stdout], args.join(' ')).toEqual([status, '']);
      expect(JSON.parse(r.stderr).error, args.join(' ')).toMatch(message);
    }
    const pk = (await ok('publishable-key', 'list', '--app', a1)).data[0].id;
    const bad = await cli('publishable-key', 'set-origins', '--key-id', pk, '--origins', 'https://a.example/path');
    expect([bad.status, JSON.parse(bad.stderr).error]).toEqual([1, expect.stringMatching(/not an origin/)]);
  });
}

// Each test runs a dozen commands, a process each: seconds apiece on a loaded machine.
const SCENARIO_TIMEOUT = 120_000;

describe('admin lists on the embedded engine (a temp DATA_DIR)', { timeout: SCENARIO_TIMEOUT }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'admin-lists-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  listScenario(async (...args) => admin(dir, ...args));
});

describe('admin lists with ENGINE=aws (dynalite, s3rver)', { timeout: SCENARIO_TIMEOUT }, () => {
  let aws: AwsEmulators;
  beforeAll(async () => {
    aws = await startAwsEmulators();
  });
  afterAll(async () => aws?.close());
  listScenario((...args) => adminOn(aws.env, ...args));
});

describe('each list and revocation has its --help, saying how it pages', { timeout: SCENARIO_TIMEOUT }, () => {
  it('prints usage, what it prints and its options, exit 0', () => {
    const dir = mkdtempSync(join(tmpdir(), 'admin-lists-help-'));
    try {
      for (const command of ['org list', 'workspace list', 'app list', 'key list', 'oauth-client list', 'publishable-key list']) {
        const r = admin(dir, ...command.split(' '), '--help');
        expect(r.status, command).toBe(0);
        expect(r.stdout).toContain(`usage: npm run --silent admin -- ${command}`);
        expect(r.stdout).toMatch(/--limit N +at most N per page, 1 to 100 \(default 100\)/);
        expect(r.stdout).toMatch(/--cursor C +the page after the one that printed this next_cursor/);
        expect(r.stdout).toContain('a page at a time');
      }
      for (const [command, says] of [['app disable', '403 key_disabled'], ['app enable', 'enabled again'], ['publishable-key set-origins', 'replacing the old one']]) {
        const r = admin(dir, ...command.split(' '), '--help');
        expect(r.status, command).toBe(0);
        expect(r.stdout).toContain(says);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('what a running server makes of the revocations', () => {
  let p: TestPlatform;
  let clock: ManualClock;
  beforeAll(async () => {
    clock = new ManualClock(Date.now());
    p = await startTestPlatform({ clock });
  });
  afterAll(async () => p?.close());

  const models = (headers: Record<string, string>) => fetch(`${p.urls.ai}/v1/models`, { headers });
  /** A Data path no route serves: 404 proves the credential was accepted (401/403 otherwise). */
  const probe = (headers: Record<string, string>) => fetch(`${p.urls.data}/v1/probe`, { headers });
  const preflight = (origin: string) => fetch(`${p.urls.data}/v1/probe`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } });
  const code = async (res: Response) => [res.status, ((await res.json()) as any).error?.code];
  const token = (client: { client_id: string; client_secret: string }) =>
    fetch(`${p.urls.ai}/v1/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });

  it("app disable: every credential bound to it answers 403 key_disabled, its clients get no token; the organization's other keys work; app enable undoes it", async () => {
    useSettings({ credentialCacheMs: 100 });
    try {
      const org = p.credentials.organization_id;
      const app = adminOk(p.dataDir, 'app', 'create', '--workspace', p.credentials.workspace_id, '--name', 'revoked', '--capabilities', 'ai.chat').id;
      const key = adminOk(p.dataDir, 'key', 'create', '--org', org, '--app', app).key;
      const client = adminOk(p.dataDir, 'oauth-client', 'create', '--app', app);
      const pk = adminOk(p.dataDir, 'publishable-key', 'create', '--app', app, '--origins', 'https://app.example').key;
      const accessToken = ((await (await token(client)).json()) as any).access_token;
      expect((await models(bearer(key))).status).toBe(200);
      expect((await models(bearer(accessToken))).status).toBe(200);
      expect(await code(await probe({ ...bearer(pk), origin: 'https://app.example' }))).toEqual([404, 'not_found']);

      adminOk(p.dataDir, 'app', 'disable', '--app', app);
      clock.advance(31_000);
      for (const headers of [bearer(key), bearer(accessToken)]) {
        const res = await models(headers);
        expect(res.status).toBe(403);
        expect(((await res.json()) as any).error).toMatchObject({ code: 'key_disabled', message: expect.stringContaining('application is disabled') });
      }
      expect(await code(await probe({ ...bearer(pk), origin: 'https://app.example' }))).toEqual([403, 'key_disabled']);
      const refused = await token(client);
      expect([refused.status, ((await refused.json()) as any).error]).toEqual([401, 'invalid_client']);
      // The organization-wide key is not the application's.
      expect((await models(bearer(p.credentials.secret_key))).status).toBe(200);

      adminOk(p.dataDir, 'app', 'enable', '--app', app);
      clock.advance(31_000);
      expect((await models(bearer(key))).status).toBe(200);
      expect((await token(client)).status).toBe(200);
    } finally {
      useSettings();
    }
  });

  it('publishable-key set-origins: a removed origin answers 403 origin_not_allowed and leaves CORS, an added one works', async () => {
    useSettings({ credentialCacheMs: 100 });
    try {
      const app = adminOk(p.dataDir, 'app', 'create', '--workspace', p.credentials.workspace_id, '--name', 'moved').id;
      const pk = adminOk(p.dataDir, 'publishable-key', 'create', '--app', app, '--origins', 'https://old.example');
      expect(await code(await probe({ ...bearer(pk.key), origin: 'https://old.example' }))).toEqual([404, 'not_found']);
      expect((await preflight('https://old.example')).status).toBe(204);

      adminOk(p.dataDir, 'publishable-key', 'set-origins', '--key-id', pk.id, '--origins', 'https://new.example');
      clock.advance(31_000);
      expect(await code(await probe({ ...bearer(pk.key), origin: 'https://old.example' }))).toEqual([403, 'origin_not_allowed']);
      expect(await code(await preflight('https://old.example'))).toEqual([403, 'origin_not_allowed']);
      const res = await probe({ ...bearer(pk.key), origin: 'https://new.example' });
      expect(res.headers.get('access-control-allow-origin')).toBe('https://new.example');
      expect(await code(res)).toEqual([404, 'not_found']);
      expect((await preflight('https://new.example')).status).toBe(204);
    } finally {
      useSettings();
    }
  });
});
