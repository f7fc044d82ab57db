/**
 * The request schemas the domain modules export by name are the source of the API documents: each
 * converts to JSON Schema (as the input a client sends). And the parse functions built on them keep
 * the convention: an unknown field or parameter named first, the spec's code for each fault.
 */
import { describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { ackBodySchema, pullBodySchema } from '../../lambdas/events/inbox.js';
import { rotateSecretBodySchema, subscriptionBodySchema } from '../../lambdas/events/subscriptions.js';
import { checkEvent, eventSchema, publishBodySchema } from '../../lambdas/events/envelope.js';
import { deadListQuerySchema } from '../../lambdas/events/dead-letters.js';
import { collectionBodySchema } from '../../lambdas/data/collections.js';
import { batchBodySchema, createRecordBodySchema, parseBatchBody, updateRecordBodySchema } from '../../lambdas/data/records.js';
import { completeUploadBodySchema } from '../../lambdas/data/blobs.js';
import { endUserTokenBodySchema } from '../../lambdas/data/end-user-tokens.js';
import { activityQuerySchema, parseActivityQuery } from '../../lambdas/activity/query.js';
import { listQuerySchema, parseListQuery } from '../../lambdas/data/record-reads.js';
import type { Collection } from '../../lambdas/data/collections.js';
import { PlatformError } from '../../lambdas/shared/errors.js';

const SCHEMAS: Record<string, () => z.core.$ZodType> = {
  pullBodySchema,
  ackBodySchema,
  subscriptionBodySchema,
  rotateSecretBodySchema,
  publishBodySchema,
  eventSchema,
  deadListQuerySchema,
  collectionBodySchema,
  createRecordBodySchema,
  updateRecordBodySchema,
  batchBodySchema,
  completeUploadBodySchema,
  endUserTokenBodySchema,
  activityQuerySchema,
  listQuerySchema,
};

const thrown = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    if (error instanceof PlatformError) return { code: error.code, param: error.param };
    throw error;
  }
  throw new Error('expected a PlatformError');
};

describe('request schemas as JSON Schema', () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`${name} converts`, () => {
      const json = z.toJSONSchema(schema(), { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
      expect(json.$schema).toEqual(expect.any(String));
      expect(json.type).toBe('object');
    });
  }

  it('describes a field where the spec has wording, and refuses unknown fields', () => {
    const json = z.toJSONSchema(pullBodySchema(), { io: 'input' }) as { properties: Record<string, { description?: string; default?: unknown }>; additionalProperties: unknown };
    expect(json.properties.max).toMatchObject({ description: expect.any(String), default: 10 });
    expect(json.additionalProperties).toBe(false);
  });
});

describe('parse functions', () => {
  it('the activity query names an unknown parameter before a wrong value', () => {
    expect(thrown(() => parseActivityQuery({ limit: 'abc', zzz: '1' }))).toEqual({ code: 'invalid_query', param: 'zzz' });
    expect(thrown(() => parseActivityQuery({ limit: '501' }))).toEqual({ code: 'invalid_query', param: 'limit' });
    expect(thrown(() => parseActivityQuery({ kind: 'record.write,nope' }))).toEqual({ code: 'invalid_query', param: 'kind' });
    expect(parseActivityQuery({ from: '5', kind: 'record.write' })).toMatchObject({ from: 5, limit: 100, kind: ['record.write'] });
  });

  it('the record list query names an unknown parameter before a wrong value; filters go by the fields', () => {
    const c = { name: 'c', fields: [{ name: 'n', type: 'number', indexed: true }] } as unknown as Collection;
    const q = (o: Record<string, string>) => Object.assign(Object.create(null) as Record<string, string>, o);
    expect(thrown(() => parseListQuery(c, q({ limit: '0', zzz: '1' })))).toEqual({ code: 'invalid_query', param: 'zzz' });
    expect(thrown(() => parseListQuery(c, q({ limit: '101' })))).toEqual({ code: 'invalid_query', param: 'limit' });
    expect(thrown(() => parseListQuery(c, q({ 'filter[m]': '1' })))).toEqual({ code: 'invalid_query', param: 'filter[m]' });
    expect(parseListQuery(c, q({ 'filter[n][gt]': '5' }))).toMatchObject({ limit: 20, sort: { descending: false } });
  });

  it("a publish's event gets the first failing check's code, an unknown field before them all", () => {
    expect(checkEvent({ type: 'Bad', data: 1, extra: 1 })).toBe('unknown_field');
    expect(checkEvent({ type: 'Bad', tier: 'x' })).toBe('invalid_type');
    expect(checkEvent({ type: 'a.b', tier: 'x', idempotency_key: '' })).toBe('invalid_event');
    expect(checkEvent({ type: 'a.b', idempotency_key: ' ' })).toBe('invalid_idempotency_key');
    expect(checkEvent({ type: 'a.b' })).toBe('data_required');
    expect(checkEvent({ type: 'a.b', data: Infinity })).toBe('invalid_event');
    expect(checkEvent({ type: 'a.b', data: 'x'.repeat(17 * 1024) })).toBe('payload_too_large');
    expect(checkEvent({ type: 'a.b', data: 'x'.repeat(17 * 1024), tier: 'advanced' })).toMatchObject({ type: 'a.b', tier: 'advanced' });
    expect(checkEvent([])).toBe('invalid_event');
  });

  it('a batch over 100 operations is batch_too_large before any operation is read', () => {
    expect(thrown(() => parseBatchBody({ ops: Array.from({ length: 101 }, () => ({ op: 'nope' })) }))).toEqual({ code: 'batch_too_large', param: 'ops' });
    expect(thrown(() => parseBatchBody({ ops: [{ op: 'update', collection: 'c' }] }))).toEqual({ code: 'invalid_body', param: 'ops.0.id' });
  });
});
