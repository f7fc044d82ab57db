/**
 * Webhook signing (spec 4.21 "Webhook delivery request", spec 3 "Secret rotation"): signatures against an independent HMAC computation, the rotation bookkeeping, the
 * receiver's helper, the sealed storage of secrets, and the copy-paste snippet of
 * docs/events/verifying-webhooks.md run as written.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveSecrets, newSigningSecret, rotate, signatureHeader, signPayload, type StoredSecret } from '../../lambdas/events/signing.js';
import { verifyWebhook } from '../../lambdas/events/verify.js';
import { openSigningSecret, SealedSecretError, sealSigningSecret } from '../../lambdas/events/secret-box.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2025-06-01T12:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

/** The reference computation, written here from the spec and sharing no code with the sources. */
function referenceSignature(secret: string, timestamp: number, body: string | Uint8Array): string {
  const message = Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body)]);
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(message).digest('hex');
}

const BODY = JSON.stringify({ event_id: 'evt_01hzzzzzzzzzzzzzzzzzzzzzzz', type: 'order.paid', data: { amount: 12, note: 'déjà vu ✓' } });
const TS = Math.floor(T0 / 1000);

function signedHeaders(secrets: string[], timestamp = TS, body: string | Uint8Array = BODY): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-event-id': 'evt_01hzzzzzzzzzzzzzzzzzzzzzzz',
    'x-event-type': 'order.paid',
    'x-event-timestamp': String(timestamp),
    'x-event-signature': signatureHeader(secrets, timestamp, body),
  };
}

describe('signing secrets', () => {
  it('are whsec_ + standard base64 of 32 random bytes, never twice the same', () => {
    const secrets = Array.from({ length: 200 }, () => newSigningSecret());
    for (const s of secrets) {
      expect(s).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(Buffer.from(s.slice(6), 'base64')).toHaveLength(32);
      expect(Buffer.from(s.slice(6), 'base64').toString('base64')).toBe(s.slice(6));
    }
    expect(new Set(secrets).size).toBe(secrets.length);
  });
});

describe('signatures', () => {
  it('match fixed vectors computed outside Node (Python hmac), for text and for raw bytes', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwAAAAAAAAAAA=';
    expect(signPayload(secret, 1_700_000_000, '{"event_id":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz","data":{"x":1}}')).toBe(
      '3d38c9ad8cdfa8f0402e332cdeb2c4eccf6e82e193f6354e8930b6fc38d16ce7',
    );
    expect(signPayload(secret, 1_700_000_000, Uint8Array.of(0, 255, 254, 10, 13))).toBe('a85cf8b28c1a2b684837a9980e8c146258c64719ebce8972e6f5f75a26d0c7e9');
  });

  it('equal an independent HMAC-SHA256 over timestamp.body keyed by the whole whsec_ string', () => {
    for (let i = 0; i < 50; i++) {
      const secret = newSigningSecret();
      const ts = 1_600_000_000 + i * 7919;
      const text = JSON.stringify({ i, s: randomBytes(i).toString('base64'), u: 'ü€😀' });
      const bytes = randomBytes(i * 3);
      expect(signPayload(secret, ts, text)).toBe(referenceSignature(secret, ts, text));
      expect(signPayload(secret, ts, text)).toMatch(/^[0-9a-f]{64}$/);
      expect(signPayload(secret, ts, bytes)).toBe(referenceSignature(secret, ts, bytes));
      // The string and its UTF-8 bytes sign alike: the body is signed as sent.
      expect(signPayload(secret, ts, Buffer.from(text, 'utf8'))).toBe(signPayload(secret, ts, text));
      // The key is the whole string, not the decoded bytes (Svix's convention).
      expect(signPayload(secret, ts, text)).not.toBe(createHmac('sha256', Buffer.from(secret.slice(6), 'base64')).update(`${ts}.${text}`).digest('hex'));
    }
  });

  it('refuse a timestamp that is not whole Unix seconds', () => {
    expect(() => signPayload('whsec_x', 1.5, 'b')).toThrow(RangeError);
    expect(() => signPayload('whsec_x', -1, 'b')).toThrow(RangeError);
    expect(() => signPayload('whsec_x', Number.NaN, 'b')).toThrow(RangeError);
  });

  it.each([1, 2, 3])('header with %i secret(s): one v1= entry each, newest first, comma-separated', (n) => {
    const secrets = Array.from({ length: n }, () => newSigningSecret()); // newest first
    const header = signatureHeader(secrets, TS, BODY);
    expect(header).toMatch(/^v1=[0-9a-f]{64}(,v1=[0-9a-f]{64})*$/);
    expect(header.split(',')).toEqual(secrets.map((s) => `v1=${referenceSignature(s, TS, BODY)}`));
  });

  it('header without any secret is an error, not an empty header', () => {
    expect(() => signatureHeader([], TS, BODY)).toThrow(RangeError);
  });
});

describe('rotation bookkeeping', () => {
  const first: StoredSecret = { sealed: 'A', created_at: iso(T0 - 30 * DAY), expires_at: null };

  it('puts the new secret first and gives the previous one 24 hours; previous_valid_until = now + 24 h', () => {
    const input = [first];
    const { secrets, previousValidUntil } = rotate(input, 'B', T0);
    expect(previousValidUntil).toBe(iso(T0 + DAY));
    expect(secrets).toEqual([
      { sealed: 'B', created_at: iso(T0), expires_at: null },
      { sealed: 'A', created_at: first.created_at, expires_at: iso(T0 + DAY) },
    ]);
    expect(input).toEqual([{ sealed: 'A', created_at: iso(T0 - 30 * DAY), expires_at: null }]); // not mutated
    expect(rotate(input, 'B', T0, HOUR).previousValidUntil).toBe(iso(T0 + HOUR));
  });

  it('rotating twice within the window keeps every unexpired secret, each with its own expiry', () => {
    const once = rotate([first], 'B', T0).secrets;
    const t1 = T0 + 6 * HOUR;
    const twice = rotate(once, 'C', t1);
    expect(twice.previousValidUntil).toBe(iso(t1 + DAY));
    expect(twice.secrets).toEqual([
      { sealed: 'C', created_at: iso(t1), expires_at: null },
      { sealed: 'B', created_at: iso(T0), expires_at: iso(t1 + DAY) },
      // min(existing expiry, now + 24 h): A keeps its earlier end.
      { sealed: 'A', created_at: first.created_at, expires_at: iso(T0 + DAY) },
    ]);
    expect(liveSecrets(twice.secrets, t1).map((s) => s.sealed)).toEqual(['C', 'B', 'A']);
    expect(liveSecrets(twice.secrets, T0 + DAY - 1).map((s) => s.sealed)).toEqual(['C', 'B', 'A']);
    expect(liveSecrets(twice.secrets, T0 + DAY).map((s) => s.sealed)).toEqual(['C', 'B']);
    expect(liveSecrets(twice.secrets, t1 + DAY).map((s) => s.sealed)).toEqual(['C']);
  });

  it('drops the secrets already expired and never lengthens a live one', () => {
    const once = rotate([first], 'B', T0).secrets;
    const twice = rotate(once, 'C', T0 + 6 * HOUR).secrets;
    const t2 = T0 + 25 * HOUR; // A expired an hour ago
    const third = rotate(twice, 'D', t2);
    expect(third.secrets).toEqual([
      { sealed: 'D', created_at: iso(t2), expires_at: null },
      { sealed: 'C', created_at: iso(T0 + 6 * HOUR), expires_at: iso(t2 + DAY) },
      { sealed: 'B', created_at: iso(T0), expires_at: iso(T0 + 6 * HOUR + DAY) },
    ]);
    // Long after: only the newest remains, and a rotation then keeps just it.
    const later = T0 + 10 * DAY;
    expect(liveSecrets(third.secrets, later).map((s) => s.sealed)).toEqual(['D']);
    expect(rotate(third.secrets, 'E', later).secrets.map((s) => [s.sealed, s.expires_at])).toEqual([
      ['E', null],
      ['D', iso(later + DAY)],
    ]);
  });

  it('liveSecrets answers newest first whatever the stored order', () => {
    const stored: StoredSecret[] = [
      { sealed: 'old', created_at: iso(T0 - 2 * HOUR), expires_at: iso(T0 + HOUR) },
      { sealed: 'new', created_at: iso(T0), expires_at: null },
      { sealed: 'gone', created_at: iso(T0 - 3 * DAY), expires_at: iso(T0 - 1) },
      { sealed: 'mid', created_at: iso(T0 - HOUR), expires_at: iso(T0 + 2 * HOUR) },
    ];
    expect(liveSecrets(stored, T0).map((s) => s.sealed)).toEqual(['new', 'mid', 'old']);
  });

  it('the live secrets sign the header newest first, and a receiver with any one of them accepts', () => {
    const plain: Record<string, string> = { A: newSigningSecret(), B: newSigningSecret(), C: newSigningSecret() };
    const stored = rotate(rotate([{ sealed: 'A', created_at: iso(T0 - DAY), expires_at: null }], 'B', T0).secrets, 'C', T0 + HOUR).secrets;
    const live = liveSecrets(stored, T0 + 2 * HOUR).map((s) => plain[s.sealed]);
    const headers = signedHeaders(live, TS + 7200);
    expect(headers['x-event-signature'].split(',')).toEqual([plain.C, plain.B, plain.A].map((s) => `v1=${referenceSignature(s, TS + 7200, BODY)}`));
    for (const s of Object.values(plain)) expect(verifyWebhook({ secret: s, headers, body: BODY, now: (TS + 7200) * 1000 })).toEqual({ ok: true });
  });
});

describe('verifyWebhook (lambdas/events/verify.ts)', () => {
  const a = newSigningSecret();
  const b = newSigningSecret();
  const c = newSigningSecret();
  const now = T0;

  it('accepts when any v1 entry matches, in any position', () => {
    const headers = signedHeaders([c, b, a]);
    for (const secret of [a, b, c]) expect(verifyWebhook({ secret, headers, body: BODY, now })).toEqual({ ok: true });
    expect(verifyWebhook({ secret: [newSigningSecret(), a], headers, body: BODY, now })).toEqual({ ok: true });
  });

  it('takes a Headers object or a record with names in any case, and the body as string or bytes', () => {
    const headers = signedHeaders([a]);
    const shouting = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
    const bytes = Buffer.from(BODY, 'utf8');
    for (const h of [headers, shouting, new Headers(headers)]) {
      for (const body of [BODY, bytes, new Uint8Array(bytes), bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)]) {
        expect(verifyWebhook({ secret: a, headers: h, body, now })).toEqual({ ok: true });
      }
    }
    // Node gives a repeated header as an array.
    expect(verifyWebhook({ secret: a, headers: { ...headers, 'x-event-signature': [`v1=${'0'.repeat(64)}`, headers['x-event-signature']] }, body: BODY, now })).toEqual({ ok: true });
  });

  it('refuses a tampered body, a wrong secret, a tampered signature or timestamp', () => {
    const headers = signedHeaders([a]);
    const no = { ok: false, reason: 'no_matching_signature' };
    expect(verifyWebhook({ secret: a, headers, body: BODY.replace('12', '13'), now })).toEqual(no);
    expect(verifyWebhook({ secret: a, headers, body: `${BODY} `, now })).toEqual(no);
    expect(verifyWebhook({ secret: a, headers, body: JSON.stringify(JSON.parse(BODY), null, 1), now })).toEqual(no);
    expect(verifyWebhook({ secret: b, headers, body: BODY, now })).toEqual(no);
    expect(verifyWebhook({ secret: a.slice(6), headers, body: BODY, now })).toEqual(no);
    const sig = headers['x-event-signature'];
    const flipped = sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0');
    expect(verifyWebhook({ secret: a, headers: { ...headers, 'x-event-signature': flipped }, body: BODY, now })).toEqual(no);
    // The timestamp is signed: another one, even within tolerance, does not match.
    expect(verifyWebhook({ secret: a, headers: { ...headers, 'x-event-timestamp': String(TS + 1) }, body: BODY, now })).toEqual(no);
    // Other versions and malformed entries are ignored, not errors.
    const hex = sig.slice(3);
    for (const bad of [`v2=${hex}`, `v1=${hex.slice(1)}`, `v1=${hex}0`, `v1:${hex}`, hex, ' ', ',,,']) {
      expect(verifyWebhook({ secret: a, headers: { ...headers, 'x-event-signature': bad }, body: BODY, now })).toEqual(no);
    }
    expect(verifyWebhook({ secret: a, headers: { ...headers, 'x-event-signature': `v2=${hex}, v1=${hex}` }, body: BODY, now })).toEqual({ ok: true });
  });

  it('refuses a timestamp 301 s off in either direction and accepts 300 s', () => {
    for (const offset of [-301, 301, -3600, 86_400]) {
      const headers = signedHeaders([a], TS + offset);
      expect(verifyWebhook({ secret: a, headers, body: BODY, now }), `offset ${offset}`).toEqual({ ok: false, reason: 'timestamp_out_of_tolerance' });
    }
    for (const offset of [-300, 0, 300]) {
      expect(verifyWebhook({ secret: a, headers: signedHeaders([a], TS + offset), body: BODY, now }), `offset ${offset}`).toEqual({ ok: true });
    }
    expect(verifyWebhook({ secret: a, headers: signedHeaders([a], TS - 600), body: BODY, now, toleranceSeconds: 600 })).toEqual({ ok: true });
    expect(verifyWebhook({ secret: a, headers: signedHeaders([a], Math.floor(Date.now() / 1000)), body: BODY })).toEqual({ ok: true });
  });

  it('refuses missing or unusable headers', () => {
    const headers = signedHeaders([a]);
    const missing = { ok: false, reason: 'missing_headers' };
    const { 'x-event-signature': _s, ...noSignature } = headers;
    const { 'x-event-timestamp': _t, ...noTimestamp } = headers;
    expect(verifyWebhook({ secret: a, headers: noSignature, body: BODY, now })).toEqual(missing);
    expect(verifyWebhook({ secret: a, headers: noTimestamp, body: BODY, now })).toEqual(missing);
    expect(verifyWebhook({ secret: a, headers: {}, body: BODY, now })).toEqual(missing);
    expect(verifyWebhook({ secret: a, headers: new Headers(), body: BODY, now })).toEqual(missing);
    expect(verifyWebhook({ secret: a, headers: { ...headers, 'x-event-signature': '' }, body: BODY, now })).toEqual(missing);
    for (const ts of ['', 'abc', '1.7e9', `${TS}.5`, '-1']) {
      expect(verifyWebhook({ secret: a, headers: { ...headers, 'x-event-timestamp': ts }, body: BODY, now }), ts).toEqual(missing);
    }
  });
});

describe('sealed signing secrets', () => {
  const serverSecret = { get: async () => new Uint8Array(32).fill(9) };
  const otherServer = { get: async () => new Uint8Array(32).fill(10) };
  const SUB = 'sub_01hzzzzzzzzzzzzzzzzzzzzzzz';

  it('open to the secret only with the same server secret and subscription id', async () => {
    const plain = newSigningSecret();
    const sealed = await sealSigningSecret(serverSecret, SUB, plain);
    expect(sealed).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(plain.slice(6, 20));
    expect(Buffer.from(sealed, 'base64url').toString('latin1')).not.toContain('whsec_');
    expect(await openSigningSecret(serverSecret, SUB, sealed)).toBe(plain);
    // A fresh nonce each time.
    expect(await sealSigningSecret(serverSecret, SUB, plain)).not.toBe(sealed);
    await expect(openSigningSecret(otherServer, SUB, sealed)).rejects.toBeInstanceOf(SealedSecretError);
    await expect(openSigningSecret(serverSecret, 'sub_01hzzzzzzzzzzzzzzzzzzzzzzy', sealed)).rejects.toBeInstanceOf(SealedSecretError);
    await expect(openSigningSecret(serverSecret, '', sealed)).rejects.toBeInstanceOf(SealedSecretError);
  });

  it('refuse every flipped byte, cut or added byte, and garbage, without saying why', async () => {
    const plain = newSigningSecret();
    const sealed = await sealSigningSecret(serverSecret, SUB, plain);
    const bytes = Buffer.from(sealed, 'base64url');
    for (let i = 0; i < bytes.length; i++) {
      for (const bit of [0x01, 0x80]) {
        const bad = Buffer.from(bytes);
        bad[i] ^= bit;
        await expect(openSigningSecret(serverSecret, SUB, bad.toString('base64url')), `byte ${i}`).rejects.toBeInstanceOf(SealedSecretError);
      }
    }
    for (const bad of [bytes.subarray(0, -1), Buffer.concat([bytes, Buffer.of(0)]), bytes.subarray(1)]) {
      await expect(openSigningSecret(serverSecret, SUB, bad.toString('base64url'))).rejects.toBeInstanceOf(SealedSecretError);
    }
    for (const bad of ['', 'a', `${sealed}=`, `${sealed}!`, sealed.replace(/./, '+'), 'A'.repeat(5000), plain]) {
      const err = await openSigningSecret(serverSecret, SUB, bad).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SealedSecretError);
      expect(String((err as Error).message)).toBe('signing secret does not open');
    }
  });
});

describe('the receiver guide (docs/events/verifying-webhooks.md)', () => {
  type Snippet = {
    verifyWebhook(secrets: string | string[], headers: Record<string, string | undefined>, rawBody: Buffer | string, nowMs?: number): boolean;
    webhookHandler(secrets: string | string[], onEvent: (event: unknown) => unknown): (req: IncomingMessage, res: ServerResponse) => void;
  };
  let dir: string;
  let snippet: Snippet;

  beforeAll(async () => {
    const guide = readFileSync(new URL('../../docs/events/verifying-webhooks.md', import.meta.url), 'utf8');
    const blocks = [...guide.matchAll(/```(?:js|javascript|mjs)\n([\s\S]*?)```/g)].map((m) => m[1]).filter((code) => code.startsWith('// verify-snippet\n'));
    expect(blocks).toHaveLength(1);
    const code = blocks[0];
    // Only node:crypto, as the guide promises.
    expect([...code.matchAll(/from '([^']+)'/g)].map((m) => m[1])).toEqual(['node:crypto']);
    dir = mkdtempSync(join(tmpdir(), 'verify-snippet-'));
    const file = join(dir, 'verify.mjs');
    writeFileSync(file, code);
    snippet = (await import(/* @vite-ignore */ pathToFileURL(file).href)) as Snippet;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('accepts a real signature (any entry of a rotation header) and refuses a tampered one', () => {
    const [newer, older] = [newSigningSecret(), newSigningSecret()];
    const headers = signedHeaders([newer, older]);
    const raw = Buffer.from(BODY, 'utf8');
    expect(snippet.verifyWebhook(older, headers, raw, T0)).toBe(true);
    expect(snippet.verifyWebhook(newer, headers, BODY, T0)).toBe(true);
    expect(snippet.verifyWebhook([newSigningSecret(), older], headers, raw, T0)).toBe(true);
    expect(snippet.verifyWebhook(older, headers, Buffer.from(BODY.replace('12', '13')), T0)).toBe(false);
    expect(snippet.verifyWebhook(newSigningSecret(), headers, raw, T0)).toBe(false);
    expect(snippet.verifyWebhook(older, { ...headers, 'x-event-timestamp': String(TS - 1) }, raw, T0)).toBe(false);
    expect(snippet.verifyWebhook(older, headers, raw, T0 + 301_000)).toBe(false);
    expect(snippet.verifyWebhook(older, headers, raw, T0 - 301_000)).toBe(false);
    expect(snippet.verifyWebhook(older, { ...headers, 'x-event-signature': undefined }, raw, T0)).toBe(false);
    expect(snippet.verifyWebhook(older, { ...headers, 'x-event-timestamp': undefined }, raw, T0)).toBe(false);
  });

  it('agrees with lambdas/events/verify.ts on signed, tampered and stale requests', () => {
    const secret = newSigningSecret();
    for (let i = 0; i < 40; i++) {
      const body = randomBytes(i * 5);
      const ts = TS + (i % 5) * 150 - 300; // -300 … +300 s from T0
      const headers = signedHeaders(i % 3 ? [newSigningSecret(), secret] : [secret], ts, body);
      const sent = i % 4 === 3 ? Buffer.concat([body, Buffer.of(1)]) : body;
      const at = T0 + (i % 7 === 6 ? 1_000_000 : 0); // 1000 s later: stale
      const ours = verifyWebhook({ secret, headers, body: sent, now: at }).ok;
      expect(snippet.verifyWebhook(secret, headers, sent, at), `case ${i}`).toBe(ours);
      expect(ours, `case ${i}`).toBe(i % 4 !== 3 && i % 7 !== 6);
    }
  });

  it('its node:http handler takes a signed delivery (204) and refuses a tampered one (400) on a real server', async () => {
    const secret = newSigningSecret();
    const received: unknown[] = [];
    const server = createServer(snippet.webhookHandler(secret, (event) => void received.push(event)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
    try {
      const ts = Math.floor(Date.now() / 1000);
      const headers = signedHeaders([newSigningSecret(), secret], ts);
      expect((await fetch(url, { method: 'POST', headers, body: BODY })).status).toBe(204);
      expect(received).toEqual([JSON.parse(BODY)]);
      expect((await fetch(url, { method: 'POST', headers, body: BODY.replace('order.paid', 'order.refunded') })).status).toBe(400);
      expect((await fetch(url, { method: 'POST', headers: signedHeaders([secret], ts - 301), body: BODY })).status).toBe(400);
      expect((await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: BODY })).status).toBe(400);
      expect(received).toHaveLength(1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
