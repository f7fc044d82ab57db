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
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${baseUrl}${path}`,
      {
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-operation-id': operationId },
      },
      (res) => {
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
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
