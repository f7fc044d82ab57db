/** parseQuery: the spec's query codes from a zod schema, an unknown parameter named first, explicit coercion. */
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { parseBody, parseQuery, queryInteger } from '../../lambdas/shared/validate.js';
import { thrownFault as fault } from '../helpers/faults.js';

const schema = z.strictObject({ lease_seconds: queryInteger({ min: 5, max: 300 }, 30) });
const q = (entries: Record<string, string>) => Object.assign(Object.create(null) as Record<string, string>, entries);

describe('parseQuery', () => {
  it('coerces a whole number and fills the default', () => {
    expect(parseQuery(schema, q({ lease_seconds: '60' }))).toEqual({ lease_seconds: 60 });
    expect(parseQuery(schema, q({}))).toEqual({ lease_seconds: 30 });
  });

  it('answers invalid_query naming the parameter, or the code the spec gives that parameter', () => {
    for (const bad of ['4', '301', '1.5', '-5', ' 5', '', '1e2', '0x10', '9999999999999999']) {
      expect(fault(() => parseQuery(schema, q({ lease_seconds: bad }))), bad).toMatchObject({ code: 'invalid_query', param: 'lease_seconds' });
      expect(fault(() => parseQuery(schema, q({ lease_seconds: bad }), { fieldCodes: { lease_seconds: 'invalid_limit' } })), bad).toMatchObject({ code: 'invalid_limit', param: 'lease_seconds' });
    }
  });

  it('names an unknown parameter before a wrong value, with its own code', () => {
    const f = fault(() => parseQuery(schema, q({ lease_seconds: 'x', zzz: '1' }), { fieldCodes: { lease_seconds: 'invalid_limit' }, takes: 'the stream takes only lease_seconds' }));
    expect(f).toEqual({ code: 'invalid_query', param: 'zzz', message: 'Unknown query parameter "zzz"; the stream takes only lease_seconds.' });
    expect(fault(() => parseQuery(schema, JSON.parse('{"__proto__":"1"}') as Record<string, string>))).toMatchObject({ code: 'invalid_query', param: '__proto__' });
  });

  it('a refinement may carry the code the spec names for it', () => {
    const ids = z.strictObject({ id: z.string().refine((v) => v.startsWith('evt_'), { message: 'an event id', params: { code: 'invalid_id' } }) });
    expect(fault(() => parseBody(ids, { id: 'x' }, { unknownField: 'unknown_field' }))).toMatchObject({ code: 'invalid_id', param: 'id' });
    expect(fault(() => parseBody(ids, { id: 'x', y: 1 }, { unknownField: 'unknown_field' }))).toMatchObject({ code: 'unknown_field', param: 'y' });
  });
});
