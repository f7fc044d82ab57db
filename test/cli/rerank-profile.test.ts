/** The admin CLI's rerank-profile commands: set, list, delete, and what they refuse (exit 1 with a message saying what to do, 2 for usage). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admin, adminOk } from '../helpers/cli.js';

let dir: string;
let org: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'rerank-profile-'));
  org = adminOk(dir, 'org', 'create', '--name', 'Acme').id;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const error = (r: { stderr: string }) => JSON.parse(r.stderr).error as string;

describe('admin CLI: rerank profiles', () => {
  it('sets, replaces, lists and deletes profiles', () => {
    const jina = adminOk(dir, 'rerank-profile', 'set', '--org', org, '--id', 'jina', '--provider', 'openai-compatible', '--base-url', 'https://api.jina.ai/v1', '--model', 'jina-reranker-v2-base-multilingual', '--api-key-env', 'JINA_API_KEY');
    expect(jina).toEqual({
      id: 'jina', organization_id: org, provider: 'openai-compatible', base_url: 'https://api.jina.ai/v1', model: 'jina-reranker-v2-base-multilingual',
      api_key_env: 'JINA_API_KEY', timeout_ms: 10_000, created_at: jina.created_at, updated_at: jina.updated_at,
    });
    const bedrock = adminOk(dir, 'rerank-profile', 'set', '--org', org, '--id', 'amazon', '--provider', 'bedrock', '--model', 'amazon.rerank-v1:0', '--timeout-ms', '2500');
    expect(bedrock).toMatchObject({ provider: 'bedrock', base_url: null, api_key_env: null, timeout_ms: 2500 });
    const replaced = adminOk(dir, 'rerank-profile', 'set', '--org', org, '--id', 'jina', '--provider', 'openai-compatible', '--base-url', 'https://api.jina.ai/v1', '--model', 'jina-reranker-m0', '--timeout-ms', '3000');
    expect(replaced).toMatchObject({ model: 'jina-reranker-m0', api_key_env: null, timeout_ms: 3000, created_at: jina.created_at });

    expect(adminOk(dir, 'rerank-profile', 'list', '--org', org)).toEqual({ data: [bedrock, replaced] });
    expect(adminOk(dir, 'rerank-profile', 'delete', '--org', org, '--id', 'amazon')).toEqual({ id: 'amazon', deleted: true });
    expect(adminOk(dir, 'rerank-profile', 'list', '--org', org).data.map((p: { id: string }) => p.id)).toEqual(['jina']);
  });

  it('refuses what cannot be a profile, saying what to do, and stores nothing', () => {
    const set = (...args: string[]) => admin(dir, 'rerank-profile', 'set', '--org', org, '--id', 'bad', ...args);
    const cases: [string[], RegExp][] = [
      [['--provider', 'cohere', '--model', 'm'], /^provider must be one of openai-compatible, bedrock$/],
      [['--provider', 'openai-compatible', '--model', 'm'], /^provider openai-compatible needs --base-url/],
      [['--provider', 'openai-compatible', '--model', 'm', '--base-url', 'https://u:p@rerank.example/v1'], /^base_url must not carry credentials/],
      [['--provider', 'openai-compatible', '--model', 'm', '--base-url', 'https://rerank.example/v1', '--timeout-ms', '60001'], /^timeout_ms must be a whole number from 1 to 60000$/],
      [['--provider', 'openai-compatible', '--model', 'm', '--base-url', 'https://rerank.example/v1', '--timeout-ms', 'soon'], /^timeout_ms must be a whole number/],
      [['--provider', 'openai-compatible', '--model', 'm', '--base-url', 'https://rerank.example/v1', '--api-key-env', 'sk live key'], /^api_key_env names an environment variable or a secret, not a key$/],
      [['--provider', 'bedrock', '--model', 'amazon.rerank-v1:0', '--api-key-env', 'KEY'], /^a bedrock profile takes no --api-key-env/],
    ];
    for (const [args, message] of cases) {
      const r = set(...args);
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      expect(error(r)).toMatch(message);
    }
    const badName = admin(dir, 'rerank-profile', 'set', '--org', org, '--id', 'no spaces', '--provider', 'bedrock', '--model', 'm');
    expect(badName.status).toBe(1);
    expect(error(badName)).toMatch(/^rerank profile id: 1 to 64 of letters, digits/);
    expect(adminOk(dir, 'rerank-profile', 'list', '--org', org).data.map((p: { id: string }) => p.id)).not.toContain('bad');
  });

  it('needs its options (usage error), an organization that exists, and a profile to delete', () => {
    expect(admin(dir, 'rerank-profile', 'set', '--org', org, '--id', 'x', '--provider', 'bedrock').status).toBe(2); // --model missing
    expect(admin(dir, 'rerank-profile', 'list').status).toBe(2);
    const noOrg = admin(dir, 'rerank-profile', 'list', '--org', 'org_nope');
    expect(noOrg.status).toBe(1);
    expect(error(noOrg)).toBe('no organization org_nope');
    const missing = admin(dir, 'rerank-profile', 'delete', '--org', org, '--id', 'never-set');
    expect(missing.status).toBe(1);
    expect(error(missing)).toBe(`no rerank profile never-set in organization ${org} (rerank-profile list shows them)`);
  });
});
