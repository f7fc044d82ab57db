/**
 * Concurrent PUTs of one collection through the local server. A PUT is the full
 * desired state, so concurrent definitions resolve as "last writer wins": every PUT answers 200/201
 * (never 500), the collection ends equal to one of the definitions sent, and `schema_version` stays
 * consistent with the answers. The documented `409 version_conflict` (retry budget spent) is
 * accepted but not expected at these sizes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, type Res } from '../helpers/data-api.js';

let p: TestPlatform;
let server: Record<string, string>;
const DB = 'coll-race';

const NULL_RULES = { list: null, view: null, create: null, update: null, delete: null };
/** Every name always has the same definition, so any two field sets are compatible. */
const POOL = [
  { name: 'title', type: 'text' },
  { name: 'price', type: 'number', indexed: true },
  { name: 'sku', type: 'text', unique: true },
  { name: 'count', type: 'integer' },
  { name: 'done', type: 'bool' },
  { name: 'meta', type: 'json' },
  { name: 'at', type: 'datetime', indexed: true },
  { name: 'body', type: 'text', fulltext: true },
];
const RULE_CHOICES = [NULL_RULES, { ...NULL_RULES, list: 'public', view: 'public' }];

const putCollection = (name: string, body: unknown) => callApi(p.urls.data, server, 'PUT', `/v1/databases/${DB}/collections/${name}`, body);
const getCollection = (name: string) => callApi(p.urls.data, server, 'GET', `/v1/databases/${DB}/collections/${name}`);

/** A random compatible definition: a non-empty subset of POOL in a random order, one of two rule sets. */
function randomDefinition(i: number) {
  const fields = POOL.filter(() => Math.random() < 0.5);
  if (!fields.length) fields.push(POOL[i % POOL.length]!);
  fields.sort(() => Math.random() - 0.5);
  return { mode: 'schema' as const, fields, rules: RULE_CHOICES[i % RULE_CHOICES.length]! };
}

const shape = (b: any) => ({ mode: b.mode, fields: b.fields, rules: b.rules });

/** No 500, each answer 200/201 or the documented 409; returns the successful answers. */
function checkAnswers(answers: Res[]): Res[] {
  for (const r of answers) {
    expect([200, 201, 409], `${r.status} ${JSON.stringify(r.body)}`).toContain(r.status);
    if (r.status === 409) expect(r.body?.error?.code).toBe('version_conflict');
  }
  return answers.filter((r) => r.status === 200 || r.status === 201);
}

beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  expect((await callApi(p.urls.data, server, 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
});
afterAll(async () => p?.close());

describe('concurrent PUTs of one collection', () => {
  it('different compatible definitions: all succeed, last writer wins, versions consistent', async () => {
    const name = 'race_mixed';
    let lastVersion = 0;
    for (let round = 0; round < 5; round++) {
      const sent = Array.from({ length: 16 }, (_, i) => randomDefinition(round * 16 + i));
      const answers = await Promise.all(sent.map((d) => putCollection(name, d)));
      const ok = checkAnswers(answers);
      expect(ok.length, 'no PUT should give up at this size').toBe(sent.length);
      // Created exactly once, in the first round.
      expect(answers.filter((r) => r.status === 201).length).toBe(round === 0 ? 1 : 0);
      // Each answer is the state its PUT left (or found unchanged): one of the definitions sent.
      for (const r of ok) expect(sent.map((d) => JSON.stringify(d))).toContain(JSON.stringify(shape(r.body)));
      // One schema_version names one state.
      const byVersion = new Map<number, string>();
      for (const r of ok) {
        const s = JSON.stringify(shape(r.body));
        expect(byVersion.get(r.body.schema_version) ?? s, `schema_version ${r.body.schema_version}`).toBe(s);
        byVersion.set(r.body.schema_version, s);
      }
      const got = await getCollection(name);
      expect(got.status).toBe(200);
      const max = Math.max(...ok.map((r) => r.body.schema_version));
      expect(got.body.schema_version).toBe(max);
      expect(JSON.stringify(shape(got.body))).toBe(byVersion.get(max));
      expect(sent.map((d) => JSON.stringify(d))).toContain(JSON.stringify(shape(got.body)));
      expect(got.body.schema_version).toBeGreaterThan(lastVersion);
      lastVersion = got.body.schema_version;
    }
  });

  it('the same definition many times at once: one 201, the rest 200, one version', async () => {
    const name = 'race_same';
    const first = { mode: 'schema', fields: POOL.slice(0, 4), rules: NULL_RULES };
    const a = checkAnswers(await Promise.all(Array.from({ length: 20 }, () => putCollection(name, first))));
    expect(a.map((r) => r.status).sort()).toEqual([...Array(19).fill(200), 201]);
    for (const r of a) expect({ ...shape(r.body), v: r.body.schema_version }).toEqual({ ...first, v: 1 });

    const second = { mode: 'schema', fields: POOL.slice(2), rules: RULE_CHOICES[1] };
    const b = checkAnswers(await Promise.all(Array.from({ length: 20 }, () => putCollection(name, second))));
    expect(b.map((r) => r.status)).toEqual(Array(20).fill(200));
    for (const r of b) expect({ ...shape(r.body), v: r.body.schema_version }).toEqual({ ...second, v: 2 });
    const got = await getCollection(name);
    expect({ ...shape(got.body), v: got.body.schema_version }).toEqual({ ...second, v: 2 });
  });
});
