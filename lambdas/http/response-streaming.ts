/**
 * A route's function behind a Lambda function URL in RESPONSE_STREAM mode (docs/decisions/ai-streaming-aws.md):
 * the chat route's server-sent events leave as the upstream sends them, which API Gateway HTTP APIs
 * cannot do. The function URL's event is payload format 2.0, the HTTP API's shape, so the route's own
 * function (httpHandler) runs unchanged, in `piped` mode: a Readable answer comes back as `stream`
 * and is piped to the response stream; any other answer is written whole.
 */
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { log } from '../shared/log.js';
import { errorBody, toPlatformError } from './error-response.js';
import type { RouteFunction } from './handler.js';
import type { RouteResult } from './types.js';

/** What `HttpResponseStream.from` takes: the status line and headers, written before the body. */
export interface StreamMetadata {
  statusCode: number;
  headers: Record<string, string>;
  cookies?: string[];
}

/** The parts of the Lambda Node.js runtime's global `awslambda` this module uses. */
export interface AwsLambdaRuntime {
  streamifyResponse(handler: StreamingHandlerBody): StreamingHandler;
  HttpResponseStream: { from(stream: Writable, metadata: StreamMetadata): Writable };
}

export type StreamingHandlerBody = (event: APIGatewayProxyEventV2, responseStream: Writable, context: Context) => Promise<void>;
/** What the runtime invokes (streamifyResponse marks it as streaming; its shape is the runtime's). */
export type StreamingHandler = (...args: never[]) => unknown;

export interface StreamingOptions {
  /** The runtime; defaults to the global `awslambda` (tests inject a stand-in). */
  runtime?: AwsLambdaRuntime;
  /**
   * The requests `fn` serves; any other goes to `otherwise`. A CloudFront behavior matches a path with
   * every method, where the HTTP API routes only the route's method to its function: a GET on the chat
   * path is the API's fallback's to answer (401 or 404), as it is behind API Gateway.
   */
  accepts?: (event: APIGatewayProxyEventV2) => boolean;
  otherwise?: RouteFunction;
}

declare const awslambda: AwsLambdaRuntime | undefined;

/**
 * The runtime's global, when this runs in Lambda. The AWS SDK's invoke store sets an empty
 * `globalThis.awslambda` of its own anywhere, so its presence alone says nothing.
 */
const globalRuntime = (): AwsLambdaRuntime | undefined =>
  typeof awslambda !== 'undefined' && typeof awslambda?.streamifyResponse === 'function' ? awslambda : undefined;

/** A streaming Lambda handler running `fn` (a route's function from httpHandler) in `piped` mode. */
export function streaming(fn: RouteFunction, options: StreamingOptions = {}): StreamingHandler {
  const runtime = options.runtime ?? globalRuntime();
  if (!runtime) {
    // Imported outside Lambda (tests, tools): nothing to stream to, and nothing should call it.
    return () => Promise.reject(new Error('response streaming needs the Lambda Node.js runtime (the global awslambda)'));
  }
  return runtime.streamifyResponse(async (event, responseStream, context) => {
    const target = options.accepts && !options.accepts(event) && options.otherwise ? options.otherwise : fn;
    let result: RouteResult;
    try {
      result = await target(event, Object.assign(context, { transport: { mode: 'piped' as const } }));
    } catch (error) {
      // The chain answers every error itself; one escaping it still gets the API's error shape.
      const failure = toPlatformError(error);
      result = { statusCode: failure.status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(errorBody(failure)) };
    }
    await writeResult(runtime, responseStream, result);
  });
}

/** Status and headers first, then the body: piped as it comes, or written whole. */
export async function writeResult(runtime: AwsLambdaRuntime, responseStream: Writable, result: RouteResult): Promise<void> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(result.headers ?? {})) headers[name] = String(value);
  const metadata: StreamMetadata = { statusCode: result.statusCode ?? 200, headers };
  if (result.cookies?.length) metadata.cookies = result.cookies;
  const out = runtime.HttpResponseStream.from(responseStream, metadata);

  if (result.stream) {
    try {
      // pipeline destroys the route's stream when the response stream closes early (the client left),
      // which aborts the upstream call (chat-completions.ts).
      await pipeline(result.stream, out);
    } catch (error) {
      if ((error as NodeJS.ErrnoException)?.code !== 'ERR_STREAM_PREMATURE_CLOSE') log.warn('streamed answer failed', { error: String(error) });
      result.stream.destroy();
      if (!out.destroyed) out.destroy();
    }
    return;
  }
  const body = result.body ? Buffer.from(result.body, result.isBase64Encoded ? 'base64' : 'utf8') : undefined;
  await new Promise<void>((resolve) => {
    out.once('error', () => resolve());
    if (body?.length) out.end(body, () => resolve());
    else out.end(() => resolve());
  });
}
