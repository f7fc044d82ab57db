import { createHmac, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { InvalidTokenError, signJwt, verifyJwt } from '../../lambdas/auth/jwt.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';
import type { PublicJwk, Signer } from '../../lambdas/engine/ports.js';

/** An in-memory signer that counts how often its public keys are fetched; `rotate` adds a current key. */
class MemorySigner implements Signer {
  keys: { kid: string; privateKey: KeyObject; jwk: PublicJwk }[] = [];
  fetches = 0;
  failFetches = false;
  constructor() {
    this.rotate();
  }
  rotate(): string {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const kid = `k_${randomBytes(8).toString('hex')}`;
    const { x, y } = publicKey.export({ format: 'jwk' });
    this.keys.unshift({ kid, privateKey, jwk: { kty: 'EC', crv: 'P-256', x: x!, y: y!, kid, alg: 'ES256', use: 'sig' } });
    return kid;
  }
  async sign(data: Uint8Array) {
    const { kid, privateKey } = this.keys[0];
    return { keyId: kid, signature: new Uint8Array(sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' })) };
  }
  async publicKeys() {
    this.fetches++;
    if (this.failFetches) throw new EngineUnavailableError('KMS GetPublicKey: ThrottlingException');
    return this.keys.map((k) => ({ ...k.jwk }));
  }
}

const NOW = Date.UTC(2026, 2, 1, 12);
const OPTS = { audience: 'platform', issuer: 'https://issuer.example', subject: 'client_1', ttlSeconds: 3600, nowMs: NOW };
const at = (nowMs: number, audience = 'platform') => ({ audience, nowMs });

const parts = (token: string) => token.split('.');
const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

async function rejects(p: Promise<unknown>, message?: RegExp) {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InvalidTokenError);
  if (message) expect((err as Error).message).toMatch(message);
}

describe('signJwt / verifyJwt', () => {
  it('round-trips: ES256 header with the kid, registered claims from the options, custom claims kept', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, { kind: 'oauth_client', org: 'org_1', exp: 1, sub: 'forged', ext: { plan: 'pro' } }, OPTS);
    const [h, p, s] = parts(token);
    expect(decode(h)).toEqual({ alg: 'ES256', typ: 'JWT', kid: signer.keys[0].kid });
    const payload = decode(p);
    expect(payload).toEqual({
      kind: 'oauth_client',
      org: 'org_1',
      ext: { plan: 'pro' },
      iss: OPTS.issuer,
      sub: 'client_1',
      aud: 'platform',
      iat: NOW / 1000,
      exp: NOW / 1000 + 3600,
      jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
    });
    expect(payload).not.toHaveProperty('nbf');
    expect(Buffer.from(s, 'base64url')).toHaveLength(64);
    expect(await verifyJwt(signer, token, at(NOW))).toEqual(payload);
    // A fresh jti every time.
    expect(decode(parts(await signJwt(signer, {}, OPTS))[1]).jti).not.toBe(payload.jti);
  });

  it('verifies within the leeway on either side', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, {}, OPTS);
    expect(await verifyJwt(signer, token, at(NOW + 3600_000 + 29_000))).toMatchObject({ sub: 'client_1' });
    expect(await verifyJwt(signer, token, at(NOW - 29_000))).toMatchObject({ sub: 'client_1' });
  });

  it('rejects anything that is not three base64url parts', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, {}, OPTS);
    const [h, p, s] = parts(token);
    for (const bad of ['', 'abc', `${h}.${p}`, `${h}.${p}.${s}.x`, `${h}.${p}.`, `${h}..${s}`, `${h}.${p}.${s}=`, `${h}.${p}+.${s}`, ` ${token}`, 'x'.repeat(20_000)]) {
      await rejects(verifyJwt(signer, bad, at(NOW)), /malformed/);
    }
    await rejects(verifyJwt(signer, undefined as unknown as string, at(NOW)));
  });

  it('rejects a header or payload that is not a JSON object', async () => {
    const signer = new MemorySigner();
    const [h, p, s] = parts(await signJwt(signer, {}, OPTS));
    await rejects(verifyJwt(signer, `${Buffer.from('{not json').toString('base64url')}.${p}.${s}`, at(NOW)), /malformed header/);
    await rejects(verifyJwt(signer, `${encode(['ES256'])}.${p}.${s}`, at(NOW)), /malformed header/);
    // A payload that is not JSON, signed for real: the signature holds, the payload still fails.
    const input = `${h}.${Buffer.from('not json').toString('base64url')}`;
    const sig = Buffer.from((await signer.sign(Buffer.from(input))).signature).toString('base64url');
    await rejects(verifyJwt(signer, `${input}.${sig}`, at(NOW)), /malformed payload/);
  });

  it('rejects a tampered payload', async () => {
    const signer = new MemorySigner();
    const [h, p, s] = parts(await signJwt(signer, { kind: 'end_user' }, OPTS));
    const claims = decode(p);
    await rejects(verifyJwt(signer, `${h}.${encode({ ...claims, sub: 'client_2' })}.${s}`, at(NOW)), /bad signature/);
    await rejects(verifyJwt(signer, `${h}.${encode({ ...claims, exp: claims.exp + 3600 })}.${s}`, at(NOW)), /bad signature/);
  });

  it('rejects a tampered signature or a signature of the wrong length', async () => {
    const signer = new MemorySigner();
    const [h, p, s] = parts(await signJwt(signer, {}, OPTS));
    const sig = Buffer.from(s, 'base64url');
    sig[31] ^= 0x01;
    await rejects(verifyJwt(signer, `${h}.${p}.${sig.toString('base64url')}`, at(NOW)), /bad signature/);
    await rejects(verifyJwt(signer, `${h}.${p}.${Buffer.from(s, 'base64url').subarray(0, 63).toString('base64url')}`, at(NOW)), /bad signature/);
    // The same key id but another key: a forgery.
    const forger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const forged = sign('sha256', Buffer.from(`${h}.${p}`), { key: forger, dsaEncoding: 'ieee-p1363' }).toString('base64url');
    await rejects(verifyJwt(signer, `${h}.${p}.${forged}`, at(NOW)), /bad signature/);
  });

  it('rejects alg none, with or without a signature', async () => {
    const signer = new MemorySigner();
    const [h, p, s] = parts(await signJwt(signer, {}, OPTS));
    const none = encode({ ...decode(h), alg: 'none' });
    await rejects(verifyJwt(signer, `${none}.${p}.`, at(NOW)));
    await rejects(verifyJwt(signer, `${none}.${p}.${s}`, at(NOW)), /algorithm/);
    await rejects(verifyJwt(signer, `${encode({ alg: 'NONE', kid: decode(h).kid })}.${p}.${s}`, at(NOW)), /algorithm/);
  });

  it('rejects HS256 signed with the public key as the secret, and any other algorithm', async () => {
    const signer = new MemorySigner();
    const [h, p] = parts(await signJwt(signer, {}, OPTS));
    const jwk = (await signer.publicKeys())[0];
    const hs = encode({ alg: 'HS256', typ: 'JWT', kid: jwk.kid });
    for (const secret of [JSON.stringify(jwk), Buffer.from(jwk.x, 'base64url')]) {
      const mac = createHmac('sha256', secret).update(`${hs}.${p}`).digest('base64url');
      await rejects(verifyJwt(signer, `${hs}.${p}.${mac}`, at(NOW)), /algorithm/);
    }
    for (const alg of ['ES384', 'RS256', 'PS256', 'EdDSA', 'es256', undefined]) {
      const [, , s] = parts(await signJwt(signer, {}, OPTS));
      await rejects(verifyJwt(signer, `${encode({ ...decode(h), alg })}.${p}.${s}`, at(NOW)), /algorithm/);
    }
  });

  it('rejects the wrong audience', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, {}, { ...OPTS, audience: 'other' });
    await rejects(verifyJwt(signer, token, at(NOW)), /audience/);
    await expect(verifyJwt(signer, token, at(NOW, 'other'))).resolves.toMatchObject({ aud: 'other' });
  });

  it('rejects an expired token once the clock moves past exp plus the leeway', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, {}, { ...OPTS, ttlSeconds: 60 });
    await expect(verifyJwt(signer, token, at(NOW + 60_000))).resolves.toBeDefined();
    await rejects(verifyJwt(signer, token, at(NOW + 90_000)), /expired/);
    await rejects(verifyJwt(signer, token, at(NOW + 86_400_000)), /expired/);
    await rejects(verifyJwt(signer, token, { ...at(NOW + 61_000), leewaySeconds: 0 }), /expired/);
  });

  it('rejects a token issued in the future beyond the leeway', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, {}, { ...OPTS, nowMs: NOW + 120_000 });
    await rejects(verifyJwt(signer, token, at(NOW)), /future/);
    await expect(verifyJwt(signer, token, { ...at(NOW), leewaySeconds: 120 })).resolves.toBeDefined();
  });

  it('rejects an unknown kid, and a missing one', async () => {
    const signer = new MemorySigner();
    const stranger = new MemorySigner();
    await rejects(verifyJwt(signer, await signJwt(stranger, {}, OPTS), at(NOW)), /unknown key id/);
    const [h, p, s] = parts(await signJwt(signer, {}, OPTS));
    const { kid: _kid, ...noKid } = decode(h);
    await rejects(verifyJwt(signer, `${encode(noKid)}.${p}.${s}`, at(NOW)), /key id/);
  });

  it('caches public keys for 10 minutes and refreshes on an unknown kid at most once a minute', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, {}, { ...OPTS, ttlSeconds: 86_400 });
    const fetchesAfterSign = signer.fetches;
    for (let i = 0; i < 5; i++) await verifyJwt(signer, token, at(NOW + i * 1000));
    expect(signer.fetches - fetchesAfterSign).toBe(1);

    const garbage = await signJwt(new MemorySigner(), {}, OPTS);
    await rejects(verifyJwt(signer, garbage, at(NOW + 10_000)), /unknown key id/);
    expect(signer.fetches - fetchesAfterSign).toBe(2);
    for (let i = 0; i < 10; i++) await rejects(verifyJwt(signer, garbage, at(NOW + 20_000 + i)), /unknown key id/);
    expect(signer.fetches - fetchesAfterSign).toBe(2);
    await rejects(verifyJwt(signer, garbage, at(NOW + 71_000)), /unknown key id/);
    expect(signer.fetches - fetchesAfterSign).toBe(3);

    // Ten minutes after the last fetch, the keys are fetched again.
    await verifyJwt(signer, token, at(NOW + 71_000 + 9 * 60_000));
    expect(signer.fetches - fetchesAfterSign).toBe(3);
    await verifyJwt(signer, token, at(NOW + 71_000 + 10 * 60_000));
    expect(signer.fetches - fetchesAfterSign).toBe(4);
  });

  it('picks up a rotated key, and signs under the key the signer really used', async () => {
    const signer = new MemorySigner();
    const oldToken = await signJwt(signer, {}, { ...OPTS, ttlSeconds: 86_400 });
    await verifyJwt(signer, oldToken, at(NOW));
    const newKid = signer.rotate();
    // signJwt guessed the old kid; the signer used the new one, so the token is signed again under it.
    const newToken = await signJwt(signer, {}, OPTS);
    expect(decode(parts(newToken)[0]).kid).toBe(newKid);
    await expect(verifyJwt(signer, newToken, at(NOW + 1000))).resolves.toMatchObject({ sub: 'client_1' });
    await expect(verifyJwt(signer, oldToken, at(NOW + 1000))).resolves.toMatchObject({ sub: 'client_1' });
  });

  it('lets the key service being down surface as EngineUnavailableError, but keeps verifying known keys', async () => {
    const signer = new MemorySigner();
    const token = await signJwt(signer, {}, { ...OPTS, ttlSeconds: 86_400 });
    signer.failFetches = true;
    await expect(verifyJwt(signer, token, at(NOW))).rejects.toBeInstanceOf(EngineUnavailableError);
    signer.failFetches = false;
    await verifyJwt(signer, token, at(NOW));
    signer.failFetches = true;
    // Past the 10 minutes the refresh fails, but the kid is known: still verifies, retried a minute later.
    const fetches = signer.fetches;
    await verifyJwt(signer, token, at(NOW + 11 * 60_000));
    await verifyJwt(signer, token, at(NOW + 11 * 60_000 + 1000));
    expect(signer.fetches - fetches).toBe(1);
    await verifyJwt(signer, token, at(NOW + 12 * 60_000 + 1000));
    expect(signer.fetches - fetches).toBe(2);
  });

  it('refuses bad signing options', async () => {
    const signer = new MemorySigner();
    await expect(signJwt(signer, {}, { ...OPTS, ttlSeconds: 0 })).rejects.toThrow(/ttlSeconds/);
    await expect(signJwt(signer, {}, { ...OPTS, ttlSeconds: 1.5 })).rejects.toThrow(/ttlSeconds/);
    await expect(signJwt(signer, {}, { ...OPTS, audience: '' })).rejects.toThrow(/audience/);
    await expect(signJwt(signer, {}, { ...OPTS, subject: '' })).rejects.toThrow(/subject/);
  });
});
