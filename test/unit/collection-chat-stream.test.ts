/**
 * The grounded chat's streaming entry (lambdas/http/handlers/ai/collection-chat-stream.ts): a function
 * URL's event has no path parameters, so the entry reads `{id}` from the path as API Gateway would,
 * and leaves every other method or path under the distribution's `/v1/collections/*\/chat` pattern to
 * the AI API's fallback.
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { accepts, withPathParameters } from '../../lambdas/http/handlers/ai/collection-chat-stream.js';

const event = (method: string, path: string): APIGatewayProxyEventV2 =>
  ({ version: '2.0', routeKey: '$default', rawPath: path, rawQueryString: '', headers: {}, isBase64Encoded: false, requestContext: { http: { method, path }, requestId: 'r1' } }) as unknown as APIGatewayProxyEventV2;

describe('the grounded chat streaming entry', () => {
  it("gives the route its {id} from the path, as API Gateway's pathParameters", () => {
    const e = event('POST', '/v1/collections/col_0123456789abcdef0123456789abcdef/chat');
    expect(accepts(e)).toBe(true);
    expect(withPathParameters(e).pathParameters).toEqual({ id: 'col_0123456789abcdef0123456789abcdef' });
  });

  it('sends other methods and paths the pattern matches to the fallback', () => {
    for (const [method, path] of [
      ['GET', '/v1/collections/col_1/chat'],
      ['POST', '/v1/collections/col_1/items/itm_1/chat'],
      ['POST', '/v1/collections//chat'],
      ['POST', '/v1/collections/col_1/chat/more'],
    ]) {
      expect(accepts(event(method, path)), `${method} ${path}`).toBe(false);
    }
  });
});
