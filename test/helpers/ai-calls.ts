/** AI API calls as a plain node:http client sends them: for tests that choose the connection. */
import http from 'node:http';

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The body parsed as JSON, or undefined (a stream, or not JSON). */
  body: any;
}

/**
 * One POST with `X-Operation-Id`, on `agent` (default `false`: a connection of its own, which
 * node:cluster hands to the next worker).
 */
export function postWithOperation(baseUrl: string, key: string, path: string, operationId: string, body: object, agent: http.Agent | false = false): Promise<Answer> {
  return postBytes(`${baseUrl}${path}`, JSON.stringify(body), { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': operationId }, agent);
}

/** One POST of any body bytes (malformed JSON too) with these headers, and its content-length. */
export function postBytes(url: string, body: string | Buffer, headers: Record<string, string>, agent: http.Agent | false = false): Promise<Answer> {
  return sendBytes('POST', url, body, headers, agent);
}

/** Any request sent byte for byte: the path as written (fetch would normalize it) and any body, with its content-length. */
export function sendBytes(method: string, url: string, body: string | Buffer | undefined, headers: Record<string, string>, agent: http.Agent | false = false, path?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const all = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) };
    const req = http.request(url, { method, agent, headers: all, ...(path === undefined ? {} : { path }) }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        let parsed: any;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode!, headers: res.headers, text, body: parsed });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
