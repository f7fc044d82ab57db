/**
 * The multipart form the openai-compatible transcription provider writes itself
 * (lambdas/ai/providers/openai-compatible/transcription.ts), read back by the runtime's own form
 * parser on a loopback server: the audio's bytes exact, OpenAI's fields, and a filename or language
 * with quotes and line breaks escaped as FormData escapes them, so no field can be forged.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { transcribe } from '../../lambdas/ai/providers/openai-compatible/transcription.js';
import type { UpstreamCall } from '../../lambdas/ai/types.js';

let server: Server;
let received: { contentType: string; length: number; form: FormData } | undefined;
let baseUrl: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const form = await new Request('http://fake.test/', { method: 'POST', headers: { 'content-type': req.headers['content-type']! }, body }).formData();
      received = { contentType: req.headers['content-type']!, length: Number(req.headers['content-length']), form };
      expect(body.length).toBe(received.length);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ duration: 3, segments: [{ start: 0, end: 3, text: 'hello' }] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const call = (upstreamModel: string | null) =>
  ({ route: { base_url: baseUrl, upstream_model: upstreamModel, max_answer_bytes: null }, apiKey: 'sk-up', signal: new AbortController().signal }) as unknown as UpstreamCall;

it('sends the bytes exactly, with model, response_format, language and timestamp_granularities[]', async () => {
  const bytes = randomBytes(300_000);
  const transcript = await transcribe(call('whisper-1'), { bytes, filename: 'piece-0001.mp3', contentType: 'audio/mpeg', language: 'pt-BR' });
  expect(transcript.segments).toEqual([{ start: 0, end: 3, text: 'hello' }]);
  const { form, contentType } = received!;
  expect(contentType).toMatch(/^multipart\/form-data; boundary=/);
  const file = form.get('file') as File;
  expect(file.name).toBe('piece-0001.mp3');
  expect(file.type).toBe('audio/mpeg');
  expect(Buffer.from(await file.arrayBuffer()).equals(bytes)).toBe(true);
  expect([...form.keys()].sort()).toEqual(['file', 'language', 'model', 'response_format', 'timestamp_granularities[]']);
  expect(form.get('model')).toBe('whisper-1');
  expect(form.get('response_format')).toBe('verbose_json');
  expect(form.get('language')).toBe('pt');
  expect(form.get('timestamp_granularities[]')).toBe('segment');
});

it('escapes a filename that tries to end its header or add a field, and leaves out model when the route has none', async () => {
  const filename = 'a"; name="model"\r\n\r\nforged\r\n--x.mp3';
  await transcribe(call(null), { bytes: new Uint8Array([1, 2, 3]), filename, contentType: 'audio/mpeg\r\nX-Evil: 1' });
  const { form } = received!;
  expect([...form.keys()].sort()).toEqual(['file', 'response_format', 'timestamp_granularities[]']);
  const file = form.get('file') as File;
  // Read back whole (the parser undoes the escapes): one file field, no forged one.
  expect(file.name).toBe(filename);
  expect(file.type).toBe('audio/mpegx-evil: 1'); // its line break removed: one header, lower-cased by the parser
  expect(Buffer.from(await file.arrayBuffer())).toEqual(Buffer.from([1, 2, 3]));
});
