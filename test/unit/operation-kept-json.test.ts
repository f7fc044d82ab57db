/**
 * An operation's answer serialized once: the kept record holds the same text JSON.stringify makes of
 * the answer with its context, and a replay gives the same answer back.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { claimOperation, type OperationRules } from '../../lambdas/shared/operations.js';

let dir: string;
let engine: EmbeddedEngine;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kept-json-'));
  engine = createEmbeddedEngine({ dataDir: dir });
});
afterAll(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

const RULES: OperationRules = { scope: 'test.op', ttlSeconds: 3600, requests: 'any' };
const body = { id: 'x', object: 'list', data: [{ embedding: [0.1, -0, 1e-7, 3] }], text: 'quote " and \\u2028 and é' };

for (const context of [{ endpoint: '/v1/embeddings', route: 'r', application: null, capability: 'ai.embeddings' }, undefined]) {
  it(`keeps the text JSON.stringify makes, ${context ? 'with' : 'without'} a context, and replays it`, async () => {
    const id = `op-${context ? 'with' : 'without'}-context`;
    const claim = await claimOperation(engine, RULES, id, { tenant: 'org_1', holdSeconds: 30, context });
    if (claim.kind !== 'run') throw new Error('expected to run');
    await claim.complete({ status: 200, body }, JSON.stringify(body));
    const record = await engine.kv.get({ pk: `idem#test.op#org_1#${id}`, sk: 'idem' });
    expect(record?.answer).toBe(JSON.stringify({ status: 200, body, context }));
    const again = await claimOperation(engine, RULES, id, { tenant: 'org_1', holdSeconds: 30, context });
    expect(again).toEqual({ kind: 'replay', answer: JSON.parse(JSON.stringify({ status: 200, body, context })) });
  });
}
