import * as z from 'zod';
import { httpHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { parseBody } from '../../../shared/validate.js';
import { openDatabase } from '../../../data/records.js';

export const MAX_BATCH_OPS = 100;

/**
 * An op's fields, passed on as sent: z.record would rebuild the object and silently drop a
 * `__proto__` key that the single-record routes refuse as 400 reserved_field (found by
 * test/model/records.model.test.ts).
 */
const Data = z.custom<Record<string, unknown>>((v) => v !== null && typeof v === 'object' && !Array.isArray(v), { message: 'must be an object' });

const Op = z
  .object({
    op: z.enum(['create', 'update', 'delete']),
    collection: z.string().min(1),
    id: z.string().optional(),
    version: z.number().int().min(1).optional(),
    data: Data.optional(),
  })
  .strict();
const Body = z.object({ ops: z.array(z.unknown()).min(1) }).strict();

/** POST /v1/databases/{database}/batch (spec 4.16): up to 100 ops in order, in one transaction. */
export const handler = httpHandler('data.batch', async (req, scope) => {
  const { ops } = parseBody(Body, req.json, { unknownField: 'invalid_body' });
  if (ops.length > MAX_BATCH_OPS) throw new PlatformError('batch_too_large', `A batch holds 1 to ${MAX_BATCH_OPS} operations.`, 'ops');
  const parsed = ops.map((op, i) => {
    const r = Op.safeParse(op);
    if (!r.success) throw new PlatformError('invalid_body', `ops.${i}: ${r.error.issues[0].path.join('.') || 'op'} ${r.error.issues[0].message}`, `ops.${i}`);
    if (r.data.op !== 'create' && !r.data.id) throw new PlatformError('invalid_body', `ops.${i}: ${r.data.op} needs an id.`, `ops.${i}.id`);
    return r.data;
  });
  const { writer } = await openDatabase(scope, req.params.database);
  return { status: 200, body: { results: await writer.apply(parsed) } };
});
