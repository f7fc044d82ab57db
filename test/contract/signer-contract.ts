/**
 * The signer contract. Every adapter runs it (signer.*.test.ts): what passes here signs ES256 with its
 * current key, publishes every key that may verify, current first, and rotates and retires keys so that
 * old tokens keep verifying until their key is retired. Signatures are checked with node:crypto and the
 * published JWK only, exactly as a third party would; jwt.ts is run on top at the end.
 */
import { createPublicKey, verify } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { PublicJwk, Signer } from '../../lambdas/engine/ports.js';
import { InvalidTokenError, signJwt, verifyJwt } from '../../lambdas/auth/jwt.js';

export interface SignerFixture {
  signer: Signer;
  /** Makes a new key current, the others staying; returns the signer to use from then on (may be the same). */
  rotate(): Promise<Signer>;
  /** Retires a key that is not current; returns the signer to use from then on (may be the same). */
  retire(kid: string): Promise<Signer>;
  cleanup(): Promise<void>;
}

const enc = (s: string) => new TextEncoder().encode(s);

/** Verifies as a relying party would: the published key with that kid, ES256, JOSE signature. */
export async function verifiesWith(signer: Signer, kid: string, data: Uint8Array, signature: Uint8Array): Promise<boolean> {
  const jwk = (await signer.publicKeys()).find((k) => k.kid === kid);
  if (!jwk) return false;
  const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
  return verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature);
}

export function signerContract(name: string, setup: () => Promise<SignerFixture>) {
  describe(`signer contract: ${name}`, () => {
    let f: SignerFixture;
    beforeEach(async () => {
      f = await setup();
    });
    afterEach(async () => f.cleanup());

    it('publishes well-formed ES256 public keys, current first', async () => {
      const keys = await f.signer.publicKeys();
      expect(keys.length).toBeGreaterThanOrEqual(1);
      for (const k of keys) {
        expect(k).toEqual<PublicJwk>({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: expect.any(String), x: expect.any(String), y: expect.any(String) });
        expect(k.x).toMatch(/^[A-Za-z0-9_-]{43}$/);
        expect(k.y).toMatch(/^[A-Za-z0-9_-]{43}$/);
        expect(Object.keys(k)).not.toContain('d');
      }
      expect(new Set(keys.map((k) => k.kid)).size).toBe(keys.length);
    });

    it('signs with the current key: a 64-byte JOSE signature the published key verifies', async () => {
      const data = enc('header.payload');
      const { keyId, signature } = await f.signer.sign(data);
      expect(keyId).toBe((await f.signer.publicKeys())[0].kid);
      expect(signature).toBeInstanceOf(Uint8Array);
      expect(signature.length).toBe(64);
      expect(await verifiesWith(f.signer, keyId, data, signature)).toBe(true);
      expect(await verifiesWith(f.signer, keyId, enc('header.payloaD'), signature)).toBe(false);
      const flipped = Uint8Array.from(signature);
      flipped[10] ^= 1;
      expect(await verifiesWith(f.signer, keyId, data, flipped)).toBe(false);
    });

    it('signs many messages, empty and large ones included', async () => {
      const messages = [new Uint8Array(0), enc('x'), new Uint8Array(5000).fill(7), ...Array.from({ length: 20 }, (_, i) => enc(`m${i}`))];
      for (const data of messages) {
        const { keyId, signature } = await f.signer.sign(data);
        expect(signature.length).toBe(64);
        expect(await verifiesWith(f.signer, keyId, data, signature), `${data.length} bytes`).toBe(true);
      }
    });

    it('rotates: new signatures use the new key, old ones still verify', async () => {
      const before = await f.signer.publicKeys();
      const data = enc('signed before the rotation');
      const old = await f.signer.sign(data);

      const signer = await f.rotate();
      const after = await signer.publicKeys();
      expect(after).toHaveLength(before.length + 1);
      expect(after.slice(1)).toEqual(before);
      const fresh = await signer.sign(data);
      expect(fresh.keyId).toBe(after[0].kid);
      expect(fresh.keyId).not.toBe(old.keyId);
      expect(await verifiesWith(signer, fresh.keyId, data, fresh.signature)).toBe(true);
      expect(await verifiesWith(signer, old.keyId, data, old.signature)).toBe(true);
      // A signature checked against the other key does not verify.
      expect(await verifiesWith(signer, fresh.keyId, data, old.signature)).toBe(false);
    });

    it('retires: the retired key is no longer published and its signatures stop verifying', async () => {
      const data = enc('signed by the key to retire');
      const old = await f.signer.sign(data);
      let signer = await f.rotate();
      const fresh = await signer.sign(data);
      signer = await f.retire(old.keyId);
      expect((await signer.publicKeys()).map((k) => k.kid)).not.toContain(old.keyId);
      expect(await verifiesWith(signer, old.keyId, data, old.signature)).toBe(false);
      expect(await verifiesWith(signer, fresh.keyId, data, fresh.signature)).toBe(true);
      expect((await signer.sign(data)).keyId).toBe(fresh.keyId);
    });

    it('carries jwt.ts tokens across a rotation until their key is retired', async () => {
      const nowMs = Date.UTC(2026, 0, 1);
      const opts = { audience: 'platform', issuer: 'platform', subject: 'client_1', ttlSeconds: 24 * 3600, nowMs };
      const oldToken = await signJwt(f.signer, { kind: 'oauth_client' }, opts);
      expect(await verifyJwt(f.signer, oldToken, { audience: 'platform', nowMs })).toMatchObject({ sub: 'client_1', kind: 'oauth_client' });

      let signer = await f.rotate();
      const newToken = await signJwt(signer, {}, opts);
      const kidOf = (t: string) => JSON.parse(Buffer.from(t.split('.')[0], 'base64url').toString()).kid;
      expect(kidOf(newToken)).toBe((await signer.publicKeys())[0].kid);
      expect(kidOf(newToken)).not.toBe(kidOf(oldToken));
      expect(await verifyJwt(signer, newToken, { audience: 'platform', nowMs })).toMatchObject({ sub: 'client_1' });
      expect(await verifyJwt(signer, oldToken, { audience: 'platform', nowMs })).toMatchObject({ sub: 'client_1' });

      signer = await f.retire(kidOf(oldToken));
      // Verifiers cache public keys for up to 10 minutes; after that the retired key is gone.
      const later = nowMs + 11 * 60_000;
      await expect(verifyJwt(signer, oldToken, { audience: 'platform', nowMs: later })).rejects.toBeInstanceOf(InvalidTokenError);
      expect(await verifyJwt(signer, newToken, { audience: 'platform', nowMs: later })).toMatchObject({ sub: 'client_1' });
    });
  });
}
