/**
 * The query of a request reaches the handlers alike through both event builders:
 * the local server's node:http -> API Gateway event translation (lambdas/local/http-server.ts
 * queryParameters) and an event as API Gateway sends it to Lambda (JSON text, parsed), both read by
 * lambdas/http/event.ts toHttpRequest. Names of Object.prototype (`__proto__`, `constructor`) are own
 * names of a prototype-less object, never swallowed or inherited.
 */
import { describe, expect, it } from 'vitest';
import { queryParameters } from '../../lambdas/local/http-server.js';
import { toHttpRequest } from '../../lambdas/http/event.js';
import { parseStreamQuery } from '../../lambdas/events/stream-input.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { apiEvent } from '../helpers/events.js';

const PATH = '/v1/workspaces/ws_x/stats';

/** As the local server builds it: the parsed query object in the event. */
const local = (search: string) => toHttpRequest({ ...apiEvent({ path: PATH }), queryStringParameters: queryParameters(search) });

/** As Lambda receives API Gateway's event: JSON text, `queryStringParameters` holding `json` as sent. */
const aws = (json: string) => toHttpRequest(JSON.parse(JSON.stringify(apiEvent({ path: PATH })).replace(/}$/, `,"queryStringParameters":${json}}`)));

/** The query string, API Gateway's JSON for it, and the own [name, value] pairs a handler sees. */
const CASES: [search: string, gatewayJson: string, expected: string[][]][] = [
  ['?__proto__=1', '{"__proto__":"1"}', [['__proto__', '1']]],
  ['?constructor=x', '{"constructor":"x"}', [['constructor', 'x']]],
  ['?toString=1&toString=2', '{"toString":"1,2"}', [['toString', '1,2']]],
  ['?limit=5&__proto__=1', '{"limit":"5","__proto__":"1"}', [['limit', '5'], ['__proto__', '1']]],
];

const entries = (q: Record<string, string>) => Object.keys(q).map((k) => [k, q[k]]);

describe('the query through both event builders', () => {
  it.each(CASES)('%s: the same own names and values, no prototype', (search, json, expected) => {
    for (const req of [local(search), aws(json)]) {
      expect(Object.getPrototypeOf(req.query)).toBeNull();
      expect(entries(req.query)).toEqual(expected);
    }
  });

  it('__proto__ is an own name in both, so a route taking no query refuses it alike', () => {
    for (const req of [local('?__proto__=1'), aws('{"__proto__":"1"}')]) {
      // GET /stats: the first own name is the unknown parameter.
      expect(Object.keys(req.query)[0]).toBe('__proto__');
      // GET /dead: only limit; what is left is unknown.
      const { limit, ...rest } = req.query;
      expect([limit, Object.keys(rest)]).toEqual([undefined, ['__proto__']]);
      // The stream's query parser.
      let thrown: unknown;
      try {
        parseStreamQuery(req.query);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(PlatformError);
      expect({ code: (thrown as PlatformError).code, param: (thrown as PlatformError).param }).toEqual({ code: 'invalid_query', param: '__proto__' });
    }
  });

  it('no inherited names: constructor and toString are absent unless sent', () => {
    for (const req of [local('?limit=5'), aws('{"limit":"5"}')]) {
      expect(req.query.constructor).toBeUndefined();
      expect(req.query.toString).toBeUndefined();
      expect(Object.keys(req.query)).toEqual(['limit']);
    }
  });
});
