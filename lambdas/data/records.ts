/** What the record routes share: the database a call names, opened for reading and writing. */
import type { DataScope } from './hooks.js';
import { Databases } from './databases.js';
import { Collections } from './collections.js';
import { RecordReader } from './record-reads.js';
import { RecordWriter, type WriteOp } from './record-writes.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { faultOf, onFirstUse, parseBody } from '../shared/validate.js';

export const MAX_BATCH_OPS = 100;

export async function openDatabase(scope: DataScope, database: string) {
  const now = () => scope.engine.clock.now();
  const db = await new Databases(scope.engine.kv, now).get(scope.principal, database);
  return {
    db,
    collections: new Collections(scope.engine.kv, now),
    reader: new RecordReader(scope.engine, scope.principal, db.key),
    writer: new RecordWriter({ ...scope, database: db.key }),
  };
}

/** The request schemas, built at their first use (onFirstUse). */
const recordSchemas = onFirstUse(() => {
  /**
   * A record's fields, passed on as sent: an object schema would rebuild the object and silently drop a
   * `__proto__` key that the write refuses as 400 reserved_field (found by test/model/records.model.test.ts).
   * Each value is checked by its field's type when the collection is known (record-writes.ts).
   */
  const fields = (message: string) =>
    z.custom<Record<string, unknown>>((v) => v !== null && typeof v === 'object' && !Array.isArray(v), { message }).check(
      // What a JSON Schema of it says (zod cannot read a custom check).
      z.meta({ type: 'object', description: "The record's fields, by name." }),
    );
  const create = fields('The body must be a JSON object of fields.').check(
    z.superRefine((b, ctx) => {
      if (b.id !== undefined && typeof b.id !== 'string') ctx.addIssue({ code: 'custom', path: ['id'], message: 'id must be a string.', params: { code: 'invalid_value' } });
    }),
  );
  const op = z.strictObject({
    op: z.enum(['create', 'update', 'delete']),
    collection: z.string().check(z.minLength(1)),
    id: z.optional(z.string()),
    version: z.optional(z.number().check(z.int(), z.minimum(1))),
    data: z.optional(fields('must be an object')),
  });
  const batch = z.strictObject({
    ops: z.array(op).check(
      z.minLength(1),
      // Its own code: 400 batch_too_large.
      z.maxLength(MAX_BATCH_OPS),
      z.describe('1 to 100 operations, applied in order in one transaction.'),
    ),
  });
  return { create, update: fields('The body must be a JSON object of fields.'), batch };
});

/** POST .../records' body: an optional own `id` and the record's fields. */
export const createRecordBodySchema = () => recordSchemas().create;
/** PATCH .../records/{id}'s body: the fields to set (null unsets one). */
export const updateRecordBodySchema = () => recordSchemas().update;
/** POST .../batch's body: `{ops: [{op, collection, id?, version?, data?}]}`. */
export const batchBodySchema = () => recordSchemas().batch;

/** A create's body: its own `id` (a string, else 400 invalid_value) and the fields. */
export function parseCreateRecordBody(body: unknown): { id?: string; data: Record<string, unknown> } {
  const { id, ...data } = parseBody(createRecordBodySchema(), body ?? null, { unknownField: 'invalid_body' });
  return { id: id as string | undefined, data };
}

/** An update's body: the fields to set. */
export const parseUpdateRecordBody = (body: unknown): Record<string, unknown> => parseBody(updateRecordBodySchema(), body ?? null, { unknownField: 'invalid_body' });

/** A batch's operations: over MAX_BATCH_OPS is 400 batch_too_large; an update or delete needs an id. */
export function parseBatchBody(body: unknown): WriteOp[] {
  const result = z.safeParse(batchBodySchema(), body ?? null);
  if (!result.success) {
    if (result.error.issues.some((i) => i.code === 'too_big' && i.path.length === 1 && i.path[0] === 'ops')) {
      throw new PlatformError('batch_too_large', `A batch holds 1 to ${MAX_BATCH_OPS} operations.`, 'ops');
    }
    const fault = faultOf(result.error, 'invalid_body', 'invalid_body');
    throw new PlatformError(fault.code, fault.message, fault.param);
  }
  return result.data.ops.map((op, i) => {
    if (op.op !== 'create' && !op.id) throw new PlatformError('invalid_body', `ops.${i}: ${op.op} needs an id.`, `ops.${i}.id`);
    return op;
  });
}
