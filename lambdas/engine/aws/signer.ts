/**
 * Signer on asymmetric KMS keys (ECC_NIST_P256, SIGN_VERIFY). The private key never leaves KMS: each
 * signature is one KMS Sign call. Public keys are fetched once per key per container (GetPublicKey)
 * and turned into JWKs. The key id of a token is the KMS key id exactly as configured, so every
 * function, configured alike (SIGNING_KEY_IDS), names keys alike.
 */
import { GetPublicKeyCommand, SignCommand, type KMSClient } from '@aws-sdk/client-kms';
import { createHash, createPublicKey } from 'node:crypto';
import type { PublicJwk, Signer } from '../ports.js';
import { callAws } from './errors.js';

/** KMS signs a RAW message of at most 4096 bytes; a longer one is hashed here and sent as its digest. */
const MAX_RAW_MESSAGE = 4096;
/** P-256: r and s are 32 bytes each. */
const COORDINATE_BYTES = 32;

export class KmsSigner implements Signer {
  private readonly keyIds: readonly string[];
  private readonly cache = new Map<string, Promise<PublicJwk>>();

  /** `keyIds`: KMS key ids or ARNs, the current (signing) key first; the others still verify. */
  constructor(private readonly client: KMSClient, keyIds: readonly string[]) {
    if (keyIds.length === 0 || keyIds.some((id) => typeof id !== 'string' || id === '')) {
      throw new Error('KmsSigner needs at least one KMS key id');
    }
    this.keyIds = [...new Set(keyIds)];
  }

  async sign(data: Uint8Array): Promise<{ keyId: string; signature: Uint8Array }> {
    const keyId = this.keyIds[0];
    const raw = data.byteLength <= MAX_RAW_MESSAGE;
    const out = await callAws('KMS Sign', () =>
      this.client.send(
        new SignCommand({
          KeyId: keyId,
          Message: raw ? data : createHash('sha256').update(data).digest(),
          MessageType: raw ? 'RAW' : 'DIGEST',
          SigningAlgorithm: 'ECDSA_SHA_256',
        }),
      ),
    );
    if (!out.Signature) throw new Error('KMS Sign returned no signature');
    return { keyId, signature: derToJose(out.Signature) };
  }

  async publicKeys(): Promise<PublicJwk[]> {
    return Promise.all(this.keyIds.map((id) => this.publicKey(id)));
  }

  private publicKey(keyId: string): Promise<PublicJwk> {
    let jwk = this.cache.get(keyId);
    if (!jwk) {
      jwk = this.fetchPublicKey(keyId);
      this.cache.set(keyId, jwk);
      // A failure is not cached: the next call asks again.
      jwk.catch(() => this.cache.delete(keyId));
    }
    return jwk.then((k) => ({ ...k }));
  }

  private async fetchPublicKey(keyId: string): Promise<PublicJwk> {
    const out = await callAws('KMS GetPublicKey', () => this.client.send(new GetPublicKeyCommand({ KeyId: keyId })));
    if (!out.PublicKey) throw new Error(`KMS GetPublicKey returned no key for ${keyId}`);
    if (out.KeySpec && out.KeySpec !== 'ECC_NIST_P256') throw new Error(`KMS key ${keyId} is ${out.KeySpec}, not ECC_NIST_P256`);
    if (out.KeyUsage && out.KeyUsage !== 'SIGN_VERIFY') throw new Error(`KMS key ${keyId} is for ${out.KeyUsage}, not SIGN_VERIFY`);
    const jwk = createPublicKey({ key: Buffer.from(out.PublicKey), format: 'der', type: 'spki' }).export({ format: 'jwk' });
    if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || !jwk.x || !jwk.y) throw new Error(`KMS key ${keyId} is not an EC P-256 key`);
    return { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y, kid: keyId, alg: 'ES256', use: 'sig' };
  }
}

/**
 * An ECDSA signature as DER (`SEQUENCE { INTEGER r, INTEGER s }`, what KMS returns) to the JOSE form
 * JWS wants: r and s as unsigned big-endian, each left-padded to `size` bytes, concatenated.
 */
export function derToJose(der: Uint8Array, size = COORDINATE_BYTES): Uint8Array {
  const fail = (why: string): never => {
    throw new Error(`malformed DER ECDSA signature: ${why}`);
  };
  let pos = 0;
  const length = (): number => {
    if (pos >= der.length) fail('truncated');
    const first = der[pos++];
    if (first < 0x80) return first;
    const bytes = first & 0x7f;
    if (bytes === 0 || bytes > 2) fail('bad length');
    let n = 0;
    for (let i = 0; i < bytes; i++) {
      if (pos >= der.length) fail('truncated');
      n = (n << 8) | der[pos++];
    }
    return n;
  };
  const integer = (): Uint8Array => {
    if (der[pos++] !== 0x02) fail('expected INTEGER');
    const len = length();
    if (len === 0 || pos + len > der.length) fail('bad INTEGER length');
    let value = der.subarray(pos, pos + len);
    pos += len;
    if (value[0] & 0x80) fail('negative INTEGER');
    while (value.length > 1 && value[0] === 0) value = value.subarray(1);
    if (value.length > size) fail('INTEGER too large');
    const out = new Uint8Array(size);
    out.set(value, size - value.length);
    return out;
  };
  if (der[pos++] !== 0x30) fail('expected SEQUENCE');
  const seqLen = length();
  if (pos + seqLen !== der.length) fail('bad SEQUENCE length');
  const r = integer();
  const s = integer();
  if (pos !== der.length) fail('trailing bytes');
  const jose = new Uint8Array(size * 2);
  jose.set(r, 0);
  jose.set(s, size);
  return jose;
}
