/**
 * A software WebAuthn authenticator for API tests: a P-256 key pair per credential (node:crypto),
 * attestation `none`, assertions signed over authenticatorData || SHA-256(clientDataJSON), and the JSON
 * @simplewebauthn/browser hands the server. Every field a test wants to break (origin, RP ID, counter,
 * flags, the key that signs) is a parameter, so a refusal is the server's, not a malformed message's.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();

/** A small CBOR encoder (RFC 8949): unsigned and negative integers, byte and text strings, maps. */
export function cbor(value: unknown): Buffer {
  const head = (major: number, n: number): Buffer => {
    if (n < 24) return Buffer.from([(major << 5) | n]);
    if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
    if (n < 0x10000) return Buffer.from([(major << 5) | 25, n >> 8, n & 0xff]);
    const b = Buffer.alloc(5);
    b[0] = (major << 5) | 26;
    b.writeUInt32BE(n, 1);
    return b;
  };
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') {
    const bytes = Buffer.from(value, 'utf8');
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), Buffer.from(value)]);
  if (value instanceof Map) return Buffer.concat([head(5, value.size), ...[...value].flatMap(([k, v]) => [cbor(k), cbor(v)])]);
  if (value && typeof value === 'object') return cbor(new Map(Object.entries(value)));
  throw new Error(`cbor: cannot encode ${typeof value}`);
}

export const FLAG = { UP: 0x01, UV: 0x04, BE: 0x08, BS: 0x10, AT: 0x40 } as const;

export interface SoftCredential {
  id: string;
  rawId: Buffer;
  privateKey: KeyObject;
  /** The COSE public key (EC2, ES256, P-256). */
  cose: Buffer;
  userHandle: string | null;
  counter: number;
}

export function newCredential(): SoftCredential {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const cose = cbor(
    new Map<number, number | Uint8Array>([
      [1, 2], // kty: EC2
      [3, -7], // alg: ES256
      [-1, 1], // crv: P-256
      [-2, Buffer.from(jwk.x!, 'base64url')],
      [-3, Buffer.from(jwk.y!, 'base64url')],
    ]),
  );
  const rawId = randomBytes(16);
  return { id: b64url(rawId), rawId, privateKey, cose, userHandle: null, counter: 0 };
}

interface Ceremony {
  challenge: string;
  origin: string;
  rpId: string;
  flags?: number;
  /** The signature counter to report; default: the credential's, plus one. */
  counter?: number;
}

const authData = (rpId: string, flags: number, counter: number, attested?: Buffer) => {
  const count = Buffer.alloc(4);
  count.writeUInt32BE(counter);
  return Buffer.concat([sha256(rpId), Buffer.from([flags]), count, ...(attested ? [attested] : [])]);
};

/** What navigator.credentials.create() answers (as JSON), for options from the server. */
export function attest(credential: SoftCredential, c: Ceremony & { userHandle?: string }) {
  const counter = c.counter ?? credential.counter;
  const idLength = Buffer.alloc(2);
  idLength.writeUInt16BE(credential.rawId.length);
  const attested = Buffer.concat([Buffer.alloc(16), idLength, credential.rawId, credential.cose]);
  const data = authData(c.rpId, c.flags ?? FLAG.UP | FLAG.UV | FLAG.AT, counter, attested);
  const clientDataJSON = JSON.stringify({ type: 'webauthn.create', challenge: c.challenge, origin: c.origin, crossOrigin: false });
  if (c.userHandle) credential.userHandle = c.userHandle;
  credential.counter = counter;
  return {
    id: credential.id,
    rawId: credential.id,
    type: 'public-key',
    response: { clientDataJSON: b64url(clientDataJSON), attestationObject: b64url(cbor({ fmt: 'none', attStmt: {}, authData: data })), transports: ['internal'] },
    clientExtensionResults: {},
    authenticatorAttachment: 'platform',
  };
}

/** What navigator.credentials.get() answers (as JSON): signed by `signer` (the credential's key unless given). */
export function assert(credential: SoftCredential, c: Ceremony & { signer?: KeyObject; userHandle?: string | null }) {
  const counter = c.counter ?? credential.counter + 1;
  const data = authData(c.rpId, c.flags ?? FLAG.UP | FLAG.UV, counter);
  const clientDataJSON = JSON.stringify({ type: 'webauthn.get', challenge: c.challenge, origin: c.origin, crossOrigin: false });
  const signature = sign('sha256', Buffer.concat([data, sha256(clientDataJSON)]), c.signer ?? credential.privateKey);
  credential.counter = Math.max(credential.counter, counter);
  const userHandle = c.userHandle === undefined ? credential.userHandle : c.userHandle;
  return {
    id: credential.id,
    rawId: credential.id,
    type: 'public-key',
    response: { clientDataJSON: b64url(clientDataJSON), authenticatorData: b64url(data), signature: b64url(signature), ...(userHandle ? { userHandle } : {}) },
    clientExtensionResults: {},
    authenticatorAttachment: 'platform',
  };
}
