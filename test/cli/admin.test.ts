/** The admin CLI as a user runs it: one JSON document on stdout, errors on stderr with a non-zero exit. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admin, adminOk, adminViaNpm } from '../helpers/cli.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'admin-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('admin CLI', () => {
  it('runs as a user types it, `npm run --silent admin -- ...`: one JSON document on stdout, or the error on stderr and a non-zero exit', () => {
    const created = adminViaNpm(dir, 'org', 'create', '--name', 'Typed');
    expect(created.status, created.stderr).toBe(0);
    expect(created.json).toMatchObject({ id: expect.stringMatching(/^org_/), name: 'Typed' });
    const refused = adminViaNpm(dir, 'org', 'create');
    expect(refused.status).not.toBe(0);
    expect(refused.stdout).toBe('');
    expect(JSON.parse(refused.stderr).error).toMatch(/missing --name/);
  });

  it('creates an organization, workspace, application, keys and routes, each as one JSON document', () => {
    const org = adminOk(dir, 'org', 'create', '--name', 'Acme');
    expect(org).toEqual({ id: expect.stringMatching(/^org_[0-9a-z]{26}$/), name: 'Acme', disabled: false, created_at: expect.any(String) });

    const ws = adminOk(dir, 'workspace', 'create', '--org', org.id, '--name', 'prod');
    expect(ws).toMatchObject({ id: expect.stringMatching(/^ws_/), organization_id: org.id, name: 'prod' });

    const app = adminOk(dir, 'app', 'create', '--workspace', ws.id, '--name', 'shop', '--capabilities', 'ai.chat,knowledge');
    expect(app).toMatchObject({ id: expect.stringMatching(/^app_/), organization_id: org.id, workspace_id: ws.id, capabilities: ['ai.chat', 'knowledge'] });

    const key = adminOk(dir, 'key', 'create', '--org', org.id, '--app', app.id);
    // permissions: null is every Events permission (the key was not narrowed).
    expect(key).toEqual({ id: expect.stringMatching(/^key_/), key: expect.stringMatching(/^aik_[0-9a-f]{64}$/), permissions: null });

    const disabled = adminOk(dir, 'key', 'disable', '--key-id', key.id);
    expect(disabled).toMatchObject({ id: key.id, disabled: true, application_id: app.id });
    expect(JSON.stringify(disabled)).not.toContain(key.key.slice(4)); // the secret is never shown again

    const route = adminOk(dir, 'route', 'set', '--org', org.id, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'bedrock', '--model', 'anthropic.claude', '--default');
    expect(route).toMatchObject({ id: 'chat', endpoint: '/v1/chat/completions', provider: 'bedrock', upstream_model: 'anthropic.claude', default: true });
    adminOk(dir, 'route', 'set', '--org', org.id, '--id', 'chat2', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', 'https://api.example/v1', '--default');
    const list = adminOk(dir, 'route', 'list', '--org', org.id);
    // One default per endpoint: the newer default cleared the older one.
    expect(list.data.map((r: { id: string; default: boolean }) => [r.id, r.default])).toEqual([
      ['chat', false],
      ['chat2', true],
    ]);

    expect(adminOk(dir, 'org', 'disable', '--org', org.id)).toMatchObject({ id: org.id, disabled: true });
  });

  it('refuses bad input on stderr with a non-zero exit and nothing on stdout', () => {
    const cases: [string[], number, RegExp][] = [
      [['nope'], 2, /unknown command/],
      [['org', 'create'], 2, /missing --name/],
      [['org', 'create', '--name', 'x', '--bogus', '1'], 2, /bogus/],
      [['workspace', 'create', '--org', 'org_missing', '--name', 'x'], 1, /no organization/],
      [['key', 'disable', '--key-id', 'key_missing'], 1, /no key/],
      [['route', 'set', '--org', 'org_missing', '--id', 'r', '--endpoint', '/v1/run', '--provider', 'bedrock'], 1, /no organization/],
    ];
    for (const [args, status, message] of cases) {
      const r = admin(dir, ...args);
      expect(r.status, args.join(' ')).toBe(status);
      expect(r.stdout).toBe('');
      expect(JSON.parse(r.stderr).error).toMatch(message);
    }
    const org = adminOk(dir, 'org', 'create', '--name', 'Checks');
    const badRoutes: [string[], RegExp][] = [
      [['--id', 'r', '--endpoint', '/v1/nope', '--provider', 'bedrock'], /endpoint must be/],
      [['--id', 'r', '--endpoint', '/v1/run', '--provider', 'acme'], /provider must be/],
      [['--id', 'auto', '--endpoint', '/v1/run', '--provider', 'bedrock'], /route id/],
      [['--id', 'r', '--endpoint', '/v1/run', '--provider', 'bedrock', '--base-url', 'ftp://x'], /base_url/],
    ];
    for (const [args, message] of badRoutes) {
      const r = admin(dir, 'route', 'set', '--org', org.id, ...args);
      expect(r.status).toBe(1);
      expect(JSON.parse(r.stderr).error).toMatch(message);
    }
    const ws = adminOk(dir, 'workspace', 'create', '--org', org.id, '--name', 'w');
    const badApp = admin(dir, 'app', 'create', '--workspace', ws.id, '--name', 'a', '--capabilities', 'ai.chat,teleport');
    expect(badApp.status).toBe(1);
    expect(JSON.parse(badApp.stderr).error).toMatch(/unknown capabilities: teleport/);
  });

  it('narrows keys and OAuth clients to Events permissions with --permissions, shown in the output', () => {
    const org = adminOk(dir, 'org', 'create', '--name', 'Narrow');
    const ws = adminOk(dir, 'workspace', 'create', '--org', org.id, '--name', 'w');
    const app = adminOk(dir, 'app', 'create', '--workspace', ws.id, '--name', 'a');

    const key = adminOk(dir, 'key', 'create', '--org', org.id, '--permissions', 'events:stats.read, events:event.publish,events:stats.read');
    // Deduplicated, in the documented order (docs/events/permissions.md).
    expect(key).toEqual({ id: expect.stringMatching(/^key_/), key: expect.stringMatching(/^aik_/), permissions: ['events:event.publish', 'events:stats.read'] });
    expect(adminOk(dir, 'key', 'disable', '--key-id', key.id)).toMatchObject({ id: key.id, permissions: ['events:event.publish', 'events:stats.read'] });

    const appKey = adminOk(dir, 'key', 'create', '--org', org.id, '--app', app.id, '--permissions', 'events:stream.open');
    expect(appKey.permissions).toEqual(['events:stream.open']);

    const client = adminOk(dir, 'oauth-client', 'create', '--app', app.id, '--permissions', 'events:subscription.read,events:subscription.write');
    expect(client).toEqual({ client_id: expect.stringMatching(/^cli_/), client_secret: expect.stringMatching(/^cls_/), permissions: ['events:subscription.read', 'events:subscription.write'] });
    expect(adminOk(dir, 'oauth-client', 'revoke', '--client-id', client.client_id)).toMatchObject({ revoked: true, permissions: ['events:subscription.read', 'events:subscription.write'] });
    expect(adminOk(dir, 'oauth-client', 'create', '--app', app.id).permissions).toBeNull();
  });

  it('refuses unknown or empty --permissions as a usage error (exit 2) naming them and the known ones', () => {
    const org = adminOk(dir, 'org', 'create', '--name', 'BadPerms');
    const ws = adminOk(dir, 'workspace', 'create', '--org', org.id, '--name', 'w');
    const app = adminOk(dir, 'app', 'create', '--workspace', ws.id, '--name', 'a');
    const cases: [string[], RegExp][] = [
      [['key', 'create', '--org', org.id, '--permissions', 'events:event.publish,events:teleport'], /unknown permissions: events:teleport; known permissions: events:event\.publish, /],
      [['key', 'create', '--org', org.id, '--permissions', 'publish'], /unknown permissions: publish/],
      [['key', 'create', '--org', org.id, '--permissions', ','], /at least one permission/],
      [['oauth-client', 'create', '--app', app.id, '--permissions', 'events:*'], /unknown permissions: events:\*/],
      [['oauth-client', 'create', '--app', app.id, '--permissions', ''], /at least one permission/],
    ];
    for (const [args, message] of cases) {
      const r = admin(dir, ...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(JSON.parse(r.stderr).error).toMatch(message);
    }
  });
});
