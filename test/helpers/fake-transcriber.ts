/**
 * A fake OpenAI-compatible transcription upstream on loopback (real HTTP): POST /audio/transcriptions
 * with OpenAI's multipart form. It measures the audio it receives with ffprobe and answers a segment
 * every `segmentSeconds` of it, each saying where it is in that file (`<file> 2.0-4.0`), so tests know
 * the times a transcript must carry. It records every request (its form fields, the file's name,
 * type, size, codec, sample rate, channels and duration); tests switch it to fail, answer junk, or
 * answer what a script returns. `delayMs` holds each answer, as a real upstream's transcription takes
 * its time (the jobs benchmark's 2 s a call).
 */
import http from 'node:http';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { closeServer, listen } from './servers.js';

export interface ReceivedAudio {
  name: string;
  type: string;
  size: number;
  /** What ffprobe read of it (undefined fields: it could not). */
  codec?: string;
  sampleRate?: number;
  channels?: number;
  duration?: number;
}

export interface FakeTranscriptionRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The form's text fields. */
  fields: Record<string, string>;
  file?: ReceivedAudio;
  /** Date.now() when the request was read (before `delayMs`). */
  receivedAt: number;
}

export type FakeTranscriberMode =
  /** Segments every `segmentSeconds` of the received audio. */
  | 'answer'
  /** No segments: the whole text and the duration (what some servers answer). */
  | 'text-only'
  /** Nothing said: no segments and an empty text. */
  | 'silent'
  /** 500 with a body that echoes a secret. */
  | 'fail'
  /** Each a malformed answer. */
  | 'not-json'
  | 'segments-not-list'
  | 'time-not-finite'
  | 'text-missing'
  | 'huge'
  /** What `script` returns for the request, as JSON. */
  | 'script';

export interface FakeTranscriber {
  /** The base URL a route is given (`/audio/transcriptions` is appended by the provider). */
  baseUrl: string;
  requests: FakeTranscriptionRequest[];
  mode: FakeTranscriberMode;
  segmentSeconds: number;
  script: (request: FakeTranscriptionRequest) => unknown;
  /** Bytes of the `huge` answer. */
  hugeBytes: number;
  /** Each answer is held this long after its request was read (0: none). */
  delayMs: number;
  close(): Promise<void>;
}

const run = promisify(execFile);

/** ffprobe's reading of the bytes: codec, sample rate, channels and duration of the first audio stream. */
async function probe(bytes: Uint8Array): Promise<Partial<ReceivedAudio>> {
  const dir = await mkdtemp(join(tmpdir(), 'fake-transcriber-'));
  try {
    await writeFile(join(dir, 'audio'), bytes);
    const { stdout } = await run('ffprobe', ['-v', 'error', '-select_streams', 'a:0', '-show_entries', 'format=duration:stream=codec_name,sample_rate,channels', '-of', 'json', join(dir, 'audio')]);
    const p = JSON.parse(stdout) as { streams?: { codec_name?: string; sample_rate?: string; channels?: number }[]; format?: { duration?: string } };
    const s = p.streams?.[0];
    return { codec: s?.codec_name, sampleRate: s?.sample_rate ? Number(s.sample_rate) : undefined, channels: s?.channels, duration: p.format?.duration ? Number(p.format.duration) : undefined };
  } catch {
    return {};
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function segmentsOf(file: ReceivedAudio, every: number) {
  const duration = file.duration ?? 0;
  const segments: { id: number; start: number; end: number; text: string }[] = [];
  for (let start = 0, id = 0; start < duration - 1e-6; start += every, id++) {
    const end = Math.min(duration, start + every);
    segments.push({ id, start, end, text: ` ${file.name} ${start.toFixed(1)}-${end.toFixed(1)}` });
  }
  return segments;
}

export async function startFakeTranscriber(): Promise<FakeTranscriber> {
  const fake: Omit<FakeTranscriber, 'baseUrl' | 'close'> = { requests: [], mode: 'answer', segmentSeconds: 2, script: () => ({}), hugeBytes: 64 * 1024, delayMs: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', async () => {
      const request: FakeTranscriptionRequest = { path: req.url ?? '', headers: req.headers, fields: {}, receivedAt: Date.now() };
      try {
        const form = await new Request('http://fake.test/', { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? '' }, body: Buffer.concat(chunks) }).formData();
        for (const [name, value] of form) {
          if (typeof value === 'string') request.fields[name] = value;
          else {
            const bytes = new Uint8Array(await value.arrayBuffer());
            request.file = { name: value.name, type: value.type, size: bytes.length, ...(await probe(bytes)) };
          }
        }
      } catch {
        // Not a form: recorded as it came, answered by the mode.
      }
      fake.requests.push(request);
      if (fake.delayMs) await new Promise((r) => setTimeout(r, fake.delayMs));
      const json = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const file = request.file ?? { name: '', type: '', size: 0 };
      const segments = segmentsOf(file, fake.segmentSeconds);
      const text = segments.map((s) => s.text).join('');
      const duration = file.duration ?? 0;
      switch (fake.mode) {
        case 'answer':
          return json({ task: 'transcribe', language: 'english', duration, text, segments, usage: { type: 'duration', seconds: Math.ceil(duration) } });
        case 'text-only':
          return json({ text, duration });
        case 'silent':
          return json({ text: '', duration, segments: [] });
        case 'fail':
          return res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"key sk-secret-in-body is invalid"}}');
        case 'not-json':
          return res.writeHead(200, { 'content-type': 'application/json' }).end('<html>busy</html>');
        case 'segments-not-list':
          return json({ text, duration, segments: { start: 0 } });
        case 'time-not-finite':
          // 1e400 is JSON for a number past a double: Infinity once parsed.
          return res.writeHead(200, { 'content-type': 'application/json' }).end(`{"text":"x","segments":[{"start":0,"end":1e400,"text":"x"}]}`);
        case 'text-missing':
          return json({ duration, segments: [{ start: 0, end: 1, text: 42 }] });
        case 'huge':
          return json({ text: 'x'.repeat(fake.hugeBytes), duration: 1 });
        case 'script':
          return json(fake.script(request));
      }
    });
  });
  return Object.assign(fake, { baseUrl: `${await listen(server)}/v1`, close: () => closeServer(server) });
}
