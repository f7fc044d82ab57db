/** The admin CLI's AI commands: an organization's granted chat fields and limits, a key's own limits. */
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
      organization_id: org, granted_fields: ['n'], limits: { rpm: null, tpm: null, concurrency: null, budget_usd: null }, operation_ids: 'required', disabled_features: [],
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
      organization_id: org, granted_fields: ['store'], limits: { rpm: 60, tpm: 100000, concurrency: 4, budget_usd: 12.5 }, operation_ids: 'required', disabled_features: [], budget: NO_BUDGET_USE,
    });
    expect(adminOk(dir, 'org', 'limits', '--org', org, '--rpm', 'none', '--budget-usd', 'NONE').limits).toEqual({ rpm: null, tpm: 100000, concurrency: 4, budget_usd: null });
    // No option: shows the settings as they are.
    expect(adminOk(dir, 'org', 'limits', '--org', org).limits).toEqual({ rpm: null, tpm: 100000, concurrency: 4, budget_usd: null });

    const notNumber = admin(dir, 'org', 'limits', '--org', org, '--rpm', 'lots');
    expect(notNumber.status).toBe(2);
    expect(JSON.parse(notNumber.stderr).error).toMatch(/--rpm takes a number/);
    const notWhole = admin(dir, 'org', 'limits', '--org', org, '--concurrency', '0.5');
    expect(notWhole.status).toBe(1);
    expect(JSON.parse(notWhole.stderr).error).toMatch(/concurrency must be a whole number from 1, or none/);
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
