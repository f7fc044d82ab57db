/** API Gateway HTTP API (payload v2) events to requests, and responses back to results. */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { HttpRequest, HttpResponse } from './types.js';

export function toHttpRequest(event: APIGatewayProxyEventV2): HttpRequest {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers ?? {})) if (v !== undefined) headers[k.toLowerCase()] = v;
  const query: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.queryStringParameters ?? {})) if (v !== undefined) query[k] = v;
  const params: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.pathParameters ?? {})) if (v !== undefined) params[k] = v;
  const body = event.body ? Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8') : Buffer.alloc(0);
  return { method: event.requestContext.http.method, path: event.rawPath, params, query, headers, body };
}

export function toResult(res: HttpResponse): APIGatewayProxyStructuredResultV2 {
  const headers: Record<string, string> = { ...res.headers };
  if (res.body === undefined || res.status === 204 || res.status === 304) {
    return { statusCode: res.status, headers, body: '' };
  }
  if (Buffer.isBuffer(res.body)) {
    headers['content-type'] ??= 'application/octet-stream';
    return { statusCode: res.status, headers, body: res.body.toString('base64'), isBase64Encoded: true };
  }
  if (typeof res.body === 'string') {
    headers['content-type'] ??= 'text/plain; charset=utf-8';
    return { statusCode: res.status, headers, body: res.body };
  }
  headers['content-type'] = 'application/json';
  return { statusCode: res.status, headers, body: JSON.stringify(res.body) };
}
