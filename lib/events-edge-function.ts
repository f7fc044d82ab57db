/**
 * The viewer-request function of the Events distribution's stream behavior (lib/events-edge.ts), as
 * CloudFront Functions JavaScript runtime 2.0 source. Kept as text built here so that a test can run
 * the very code CloudFront runs (test/infra/events-edge.test.ts).
 */
import { STREAM_PATH_HEADER } from '../lambdas/http/routes.js';

/** The distribution's origin ids: the function selects the HTTP one by id. */
export const EDGE_ORIGIN_IDS = { http: 'events-http', socket: 'events-socket' } as const;
/** The spec's stream path (`*` matches across `/` in CloudFront path patterns). */
export const STREAM_PATH_PATTERN = '/v1/workspaces/*/subscriptions/*/stream';

/** The function body without its import line, for a test to evaluate with a stand-in `cf` module. */
export function streamRouteHandlerSource(stage: string): string {
  return `function handler(event) {
  var request = event.request;
  var upgrade = request.headers.upgrade;
  if (upgrade && upgrade.value.toLowerCase() === 'websocket') {
    request.headers[${JSON.stringify(STREAM_PATH_HEADER)}] = { value: request.uri };
    request.uri = ${JSON.stringify(`/${stage}`)};
    return request;
  }
  cf.selectRequestOriginById(${JSON.stringify(EDGE_ORIGIN_IDS.http)});
  return request;
}`;
}

/** CloudFront's module of helper methods (origin selection), which runtime 2.0 code imports by this name. */
const CLOUDFRONT_MODULE = "'cloudfront'";
export const streamRouteFunctionCode = (stage: string) => `import cf from ${CLOUDFRONT_MODULE};\n\n${streamRouteHandlerSource(stage)}\n`;
