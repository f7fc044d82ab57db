/**
 * The Data API's upload relay: a Lambda@Edge origin-request function on the Data distribution's file
 * paths (lib/data-edge.ts, docs/data/blobs.md "Large files on AWS").
 *
 * API Gateway reads a whole body before any function runs, so a PUT of a file or part over the Lambda
 * payload would never reach the route that redirects it to S3. For such a PUT this function asks the
 * API itself with the headers only (the `Upload-Length` announcement, no body) and answers the client
 * with the API's answer: the 307 to S3 or an error. The client's body is never forwarded; an unchanged
 * client (curl -L -T, fetch) then sends it to the Location. Every other request goes on to the API
 * untouched. No rule lives here: a header rewrite and one HTTP call, so the routes decide everything.
 */
import type { CloudFrontHeaders, CloudFrontRequestEvent, CloudFrontRequestResult, CloudFrontResultResponse } from 'aws-lambda';
import { LAMBDA_MAX_BODY_BYTES } from '../http/event.js';
import { errorBody } from '../http/error-response.js';
import { PlatformError } from '../shared/errors.js';

/** Within Lambda@Edge's 30 s for origin-request functions. */
const ORIGIN_TIMEOUT_MS = 25_000;
/** Request headers not passed on to the API: the body's own, and the hop's. */
const NOT_FORWARDED = new Set(['content-length', 'transfer-encoding', 'expect', 'host', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer']);
/** Response headers CloudFront refuses in a generated response (read-only or its own). */
const NOT_RETURNED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'via', 'x-cache', 'trailer', 'te', 'proxy-authenticate', 'content-encoding']);

export async function handler(event: CloudFrontRequestEvent): Promise<CloudFrontRequestResult> {
  const { request } = event.Records[0].cf;
  const declared = request.headers['content-length']?.[0]?.value;
  const size = declared !== undefined && /^\d{1,16}$/.test(declared) ? Number(declared) : 0;
  const origin = request.origin?.custom;
  if (request.method !== 'PUT' || size <= LAMBDA_MAX_BODY_BYTES || !origin) return request;

  const headers = new Headers();
  for (const [name, values] of Object.entries(request.headers)) {
    if (!NOT_FORWARDED.has(name)) for (const { value } of values) headers.append(name, value);
  }
  headers.set('upload-length', String(size));
  const url = `${origin.protocol}://${origin.domainName}${origin.port && ![80, 443].includes(origin.port) ? `:${origin.port}` : ''}${origin.path ?? ''}${request.uri}${request.querystring ? `?${request.querystring}` : ''}`;
  let answer: Response;
  try {
    answer = await fetch(url, { method: 'PUT', headers, redirect: 'manual', signal: AbortSignal.timeout(ORIGIN_TIMEOUT_MS) });
  } catch {
    return unavailable();
  }
  return { status: String(answer.status), statusDescription: answer.statusText, headers: returned(answer.headers), body: await answer.text() };
}

function returned(from: Headers): CloudFrontHeaders {
  const headers: CloudFrontHeaders = {};
  from.forEach((value, name) => {
    if (!NOT_RETURNED.has(name)) (headers[name] ??= []).push({ key: name, value });
  });
  return headers;
}

/** The platform's error shape (spec 7), as the API answers when its engine is unavailable. */
function unavailable(): CloudFrontResultResponse {
  const error = new PlatformError('service_unavailable', 'The Data API could not be reached; retry.');
  return {
    status: String(error.status),
    headers: { 'content-type': [{ key: 'Content-Type', value: 'application/json' }] },
    body: JSON.stringify(errorBody(error)),
  };
}
