/**
 * The admin CLI's AI commands: an organization's granted chat fields, limits and knowledge job cap, a
 * key's own limits, the `knowledge` feature switch, and a transcription route's price per minute.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admin, adminOk } from '../helpers/cli.js';
import { GRANTABLE_FIELDS } from '../../lambdas/ai/org-settings.js';

let dir: string;
let org: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ai-admin-'));
  org = adminOk(dir, 'org', 'create', '--name', 'Acme').id;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NO_BUDGET_USE = { spent_usd: 0, held_usd: 0 };

describe('admin CLI: AI settings', () => {
  it('grants and revokes chat fields, refusing a field that is not grantable with the list of those that are', () => {
    expect(adminOk(dir, 'org', 'grant-field', '--org', org, '--field', 'n')).toEqual({
      organization_id: org, granted_fields: ['n'], limits: { rpm: null, tpm: null, concurrency: null, budget_usd: null, knowledge_job_cap_usd: null, knowledge_keep_source_hours: null }, operation_ids: 'required', disabled_features: [],
    });
    expect(adminOk(dir, 'org', 'grant-field', '--org', org, '--field', 'store').granted_fields).toEqual(['n', 'store']);
    expect(adminOk(dir, 'org', 'revoke-field', '--org', org, '--field', 'n').granted_fields).toEqual(['store']);

    const unknown = admin(dir, 'org', 'grant-field', '--org', org, '--field', 'temperature');
    expect(unknown.status).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(JSON.parse(unknown.stderr).error).toBe(`field must be one of ${GRANTABLE_FIELDS.join(', ')}`);

    const noOrg = admin(dir, 'org', 'revoke-field', '--org', 'org_nope', '--field', 'n');
    expect(noOrg.status).toBe(1);
    expect(JSON.parse(noOrg.stderr).error).toMatch(/no organization org_nope/);
    expect(admin(dir, 'org', 'grant-field', '--org', org).status).toBe(2); // --field missing
  });

  it('sets, shows and lifts limits (none lifts one; absent leaves it)', () => {
    const set = adminOk(dir, 'org', 'limits', '--org', org, '--rpm', '60', '--tpm', '100000', '--concurrency', '4', '--budget-usd', '12.5');
    expect(set).toEqual({
      organization_id: org, granted_fields: ['store'], limits: { rpm: 60, tpm: 100000, concurrency: 4, budget_usd: 12.5, knowledge_job_cap_usd: null, knowledge_keep_source_hours: null }, operation_ids: 'required', disabled_features: [], budget: NO_BUDGET_USE,
    });
    expect(adminOk(dir, 'org', 'limits', '--org', org, '--rpm', 'none', '--budget-usd', 'NONE').limits).toEqual({ rpm: null, tpm: 100000, concurrency: 4, budget_usd: null, knowledge_job_cap_usd: null, knowledge_keep_source_hours: null });
    // No option: shows the settings as they are.
    expect(adminOk(dir, 'org', 'limits', '--org', org).limits).toEqual({ rpm: null, tpm: 100000, concurrency: 4, budget_usd: null, knowledge_job_cap_usd: null, knowledge_keep_source_hours: null });

    const notNumber = admin(dir, 'org', 'limits', '--org', org, '--rpm', 'lots');
    expect(notNumber.status).toBe(2);
    expect(JSON.parse(notNumber.stderr).error).toMatch(/--rpm takes a number/);
    const notWhole = admin(dir, 'org', 'limits', '--org', org, '--concurrency', '0.5');
    expect(notWhole.status).toBe(1);
    expect(JSON.parse(notWhole.stderr).error).toMatch(/concurrency must be a whole number from 1, or none/);
  });

  describe('the knowledge job cap', () => {
    let capped: string;
    beforeAll(() => {
      capped = adminOk(dir, 'org', 'create', '--name', 'Capped').id;
    });

    it('is none by default, set, shown with the AI settings, kept by other changes and lifted with none', () => {
      expect(adminOk(dir, 'org', 'limits', '--org', capped).limits.knowledge_job_cap_usd).toBeNull();
      const set = adminOk(dir, 'org', 'limits', '--org', capped, '--knowledge-job-cap-usd', '25.5');
      expect(set.limits).toEqual({ rpm: null, tpm: null, concurrency: null, budget_usd: null, knowledge_job_cap_usd: 25.5, knowledge_keep_source_hours: null });
      expect(adminOk(dir, 'org', 'limits', '--org', capped, '--rpm', '5').limits).toEqual({ rpm: 5, tpm: null, concurrency: null, budget_usd: null, knowledge_job_cap_usd: 25.5, knowledge_keep_source_hours: null });
      expect(adminOk(dir, 'org', 'settings', '--org', capped).limits.knowledge_job_cap_usd).toBe(25.5);
      expect(adminOk(dir, 'org', 'features', '--org', capped).limits.knowledge_job_cap_usd).toBe(25.5);
      expect(adminOk(dir, 'org', 'limits', '--org', capped, '--knowledge-job-cap-usd', '0').limits.knowledge_job_cap_usd).toBe(0);
      expect(adminOk(dir, 'org', 'limits', '--org', capped, '--knowledge-job-cap-usd', 'none').limits.knowledge_job_cap_usd).toBeNull();
    });

    it('refuses what is no USD amount from 0 to 1e9, writing nothing, and is no option of a key', () => {
      adminOk(dir, 'org', 'limits', '--org', capped, '--knowledge-job-cap-usd', '7');
      const refusals: [string, number, RegExp][] = [
        ['-1', 1, /knowledge_job_cap_usd must be a number of USD from 0 to 1000000000, or none/],
        ['1000000001', 1, /knowledge_job_cap_usd must be a number of USD from 0 to 1000000000, or none/],
        ['1e999', 2, /--knowledge-job-cap-usd takes a number, got "1e999"/],
        ['ten', 2, /--knowledge-job-cap-usd takes a number, got "ten"/],
      ];
      for (const [value, status, message] of refusals) {
        // `--option=-1`: a value after a space that starts with "-" is refused by the parser as ambiguous.
        const r = admin(dir, 'org', 'limits', '--org', capped, `--knowledge-job-cap-usd=${value}`);
        expect([value, r.status, r.stdout]).toEqual([value, status, '']);
        expect(JSON.parse(r.stderr).error).toMatch(message);
      }
      expect(adminOk(dir, 'org', 'limits', '--org', capped).limits.knowledge_job_cap_usd).toBe(7);
      // An organization's cap: a key has none of its own.
      const key = adminOk(dir, 'key', 'create', '--org', capped);
      const onKey = admin(dir, 'key', 'limits', '--key-id', key.id, '--knowledge-job-cap-usd', '5');
      expect(onKey.status).toBe(2);
      expect(JSON.parse(onKey.stderr).error).toMatch(/knowledge-job-cap-usd/);
    });
  });

  it('switches the knowledge feature off and on again', () => {
    const switched = adminOk(dir, 'org', 'create', '--name', 'Switched').id;
    expect(adminOk(dir, 'org', 'features', '--org', switched, '--disable', 'knowledge').disabled_features).toEqual(['knowledge']);
    expect(adminOk(dir, 'org', 'features', '--org', switched, '--disable', 'collections').disabled_features).toEqual(['collections', 'knowledge']);
    expect(adminOk(dir, 'org', 'features', '--org', switched, '--enable', 'knowledge').disabled_features).toEqual(['collections']);
  });

  describe('a price per minute of audio', () => {
    let priced: string;
    const transcription = ['--endpoint', '/v1/audio/transcriptions', '--provider', 'openai-compatible', '--base-url', 'https://api.example/v1', '--model', 'whisper-1'];
    const chat = ['--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', 'https://api.example/v1', '--model', 'gpt'];
    const route = (...args: string[]) => admin(dir, 'route', 'set', '--org', priced, ...args);
    /** Each route's [price_per_minute, price_in_per_mtok], as `route list` shows them. */
    const listed = () =>
      Object.fromEntries(adminOk(dir, 'route', 'list', '--org', priced).data.map((r: { id: string; price_per_minute: number | null; price_in_per_mtok: number | null }) => [r.id, [r.price_per_minute, r.price_in_per_mtok]]));
    beforeAll(() => {
      priced = adminOk(dir, 'org', 'create', '--name', 'Priced').id;
    });

    it('is set on a transcription route, beside any token price, shown by route list, and lifted with none', () => {
      expect(adminOk(dir, 'route', 'set', '--org', priced, '--id', 'whisper', ...transcription, '--price-per-minute', '0.006')).toMatchObject({
        id: 'whisper', price_per_minute: 0.006, price_in_per_mtok: null, price_out_per_mtok: null,
      });
      // With a token price too (gpt-4o-transcribe bills tokens): both kept.
      adminOk(dir, 'route', 'set', '--org', priced, '--id', 'gpt-transcribe', ...transcription, '--price-per-minute', '0.003', '--price-in-per-mtok', '2.5');
      adminOk(dir, 'route', 'set', '--org', priced, '--id', 'chat', ...chat, '--price-in-per-mtok', '1');
      expect(listed()).toEqual({ whisper: [0.006, null], 'gpt-transcribe': [0.003, 2.5], chat: [null, 1] });
      // `none` lifts a price (as leaving it out does: route set writes the whole route).
      expect(adminOk(dir, 'route', 'set', '--org', priced, '--id', 'whisper', ...transcription, '--price-per-minute', 'none').price_per_minute).toBeNull();
      expect(adminOk(dir, 'route', 'set', '--org', priced, '--id', 'chat', ...chat, '--price-in-per-mtok', 'NONE').price_in_per_mtok).toBeNull();
      expect(listed()).toEqual({ whisper: [null, null], 'gpt-transcribe': [0.003, 2.5], chat: [null, null] });
    });

    it('is refused on another endpoint, and when no USD amount, writing nothing', () => {
      adminOk(dir, 'route', 'set', '--org', priced, '--id', 'kept', ...transcription, '--price-per-minute', '0.01');
      const before = listed();
      const onChat = route('--id', 'chat', ...chat, '--price-per-minute', '0.006');
      expect([onChat.status, onChat.stdout]).toEqual([1, '']);
      expect(JSON.parse(onChat.stderr).error).toBe(
        'price_per_minute prices minutes of audio: it is for /v1/audio/transcriptions routes only, not /v1/chat/completions (price tokens with --price-in-per-mtok, --price-out-per-mtok)',
      );
      const onRun = route('--id', 'run', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', 'https://run.example/x', '--price-per-minute', '1');
      expect(JSON.parse(onRun.stderr).error).toMatch(/for \/v1\/audio\/transcriptions routes only, not \/v1\/run/);
      const refusals: [string, number, RegExp][] = [
        ['-0.5', 1, /price_per_minute must be a number of USD from 0/],
        ['1000001', 1, /price_per_minute must be a number of USD from 0/],
        ['1e999', 2, /--price-per-minute takes a number, got "1e999"/],
        ['cheap', 2, /--price-per-minute takes a number, got "cheap"/],
      ];
      for (const [value, status, message] of refusals) {
        const r = route('--id', 'kept', ...transcription, `--price-per-minute=${value}`);
        expect([value, r.status, r.stdout]).toEqual([value, status, '']);
        expect(JSON.parse(r.stderr).error).toMatch(message);
      }
      expect(listed()).toEqual(before);
      expect(before.kept).toEqual([0.01, null]);
    });
  });

  it("sets a secret key's own limits, only on a key that exists", () => {
    const key = adminOk(dir, 'key', 'create', '--org', org);
    expect(adminOk(dir, 'key', 'limits', '--key-id', key.id, '--rpm', '10', '--concurrency', '1')).toEqual({
      key_id: key.id, limits: { rpm: 10, tpm: null, concurrency: 1, budget_usd: null }, budget: NO_BUDGET_USE,
    });
    const missing = admin(dir, 'key', 'limits', '--key-id', 'key_nope', '--rpm', '1');
    expect(missing.status).toBe(1);
    expect(JSON.parse(missing.stderr).error).toBe('no secret key key_nope');
  });
});
