/** What a client sends a stream (lambdas/events/stream-input.ts): the spec's codes for its query and its frames. */
import { describe, expect, it } from 'vitest';
import { MAX_CLIENT_FRAME_BYTES, parseClientFrame, parseStreamQuery } from '../../lambdas/events/stream-input.js';
import { thrownFault as fault } from '../helpers/faults.js';

const q = (entries: Record<string, string>) => Object.assign(Object.create(null) as Record<string, string>, entries);
const EVT = 'evt_00000000000000000000000000';

describe('the stream query', () => {
  it('takes lease_seconds from 5 to 300, 30 when absent', () => {
    expect(parseStreamQuery(q({}))).toEqual({ leaseSeconds: 30 });
    expect(parseStreamQuery(q({ lease_seconds: '5' }))).toEqual({ leaseSeconds: 5 });
    expect(parseStreamQuery(q({ lease_seconds: '300' }))).toEqual({ leaseSeconds: 300 });
  });

  it('answers invalid_limit for a lease out of range or not a whole number, invalid_query for any other parameter first', () => {
    for (const bad of ['4', '301', '', '1e2', '5,5', '-5', '5.0']) expect(fault(() => parseStreamQuery(q({ lease_seconds: bad }))), bad).toMatchObject({ code: 'invalid_limit', param: 'lease_seconds' });
    expect(fault(() => parseStreamQuery(q({ lease_seconds: '4', max: '1' })))).toEqual({
      code: 'invalid_query',
      param: 'max',
      message: 'Unknown query parameter "max"; the stream takes only lease_seconds.',
    });
  });
});

describe('a client frame', () => {
  it('is {"ack": [ids]}: the ids, each once', () => {
    expect(parseClientFrame(JSON.stringify({ ack: [EVT, EVT, `${EVT}.2`] }))).toEqual([EVT, `${EVT}.2`]);
  });

  it(`is at most ${MAX_CLIENT_FRAME_BYTES} bytes: payload_too_large past it`, () => {
    const frame = (bytes: number) => {
      const head = JSON.stringify({ ack: [EVT] });
      return `${head.slice(0, -1)}${' '.repeat(bytes - head.length)}}`;
    };
    expect(Buffer.byteLength(frame(MAX_CLIENT_FRAME_BYTES))).toBe(49_152);
    expect(parseClientFrame(frame(MAX_CLIENT_FRAME_BYTES))).toEqual([EVT]);
    expect(fault(() => parseClientFrame(frame(MAX_CLIENT_FRAME_BYTES + 1))).code).toBe('payload_too_large');
  });

  it('answers invalid_body, unknown_field (named before a wrong ack) or invalid_id', () => {
    for (const bad of ['not json', 'null', '[]', '"ack"', '{}', '{"ack": []}', '{"ack": "x"}', `{"ack": [${Array(101).fill(`"${EVT}"`).join(',')}]}`]) {
      expect(fault(() => parseClientFrame(bad)).code, bad).toBe('invalid_body');
    }
    expect(fault(() => parseClientFrame('{"ack": 1, "nack": [1]}'))).toMatchObject({ code: 'unknown_field', param: 'nack' });
    expect(fault(() => parseClientFrame(`{"ack": ["${EVT}"], "__proto__": 1}`))).toMatchObject({ code: 'unknown_field', param: '__proto__' });
    expect(fault(() => parseClientFrame('{"ack": ["evt_x"]}')).code).toBe('invalid_id');
    expect(fault(() => parseClientFrame(`{"ack": ["${EVT}.0"]}`)).code).toBe('invalid_id');
  });
});
