/**
 * The KMS signer against a mocked KMS that holds real P-256 keys made here: Sign answers a real DER
 * signature and GetPublicKey real SPKI, so the whole signer contract runs through KmsSigner's
 * conversions. Also: error translation, the GetPublicKey cache, and derToJose on edge cases.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, verify, type KeyObject } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  DisabledException,
  GetPublicKeyCommand,
  KMSClient,
  KMSInternalException,
  KMSServiceException,
  NotFoundException,
  SignCommand,
} from '@aws-sdk/client-kms';
import { KmsSigner, derToJose } from '../../lambdas/engine/aws/signer.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';
import { signerContract, verifiesWith } from './signer-contract.js';

const kms = mockClient(KMSClient);
const client = () => new KMSClient({ region: 'us-east-1' });

/** The mocked KMS's keys, by key id as configured. */
let keys: Map<string, { privateKey: KeyObject; publicKey: KeyObject }>;
/** DIGEST requests are signed here from the message they digest (node:crypto cannot sign a bare digest). */
let digested: Map<string, Uint8Array>;

const notFound = (id: string) => new NotFoundException({ message: `Key '${id}' does not exist`, $metadata: { httpStatusCode: 400 } });

function newKey(): string {
  const id = `arn:aws:kms:us-east-1:111122223333:key/${randomBytes(16).toString('hex')}`;
  keys.set(id, generateKeyPairSync('ec', { namedCurve: 'P-256' }));
  return id;
}

function backWithRealKeys() {
  keys = new Map();
  digested = new Map();
  kms.on(SignCommand).callsFake(async (input) => {
    const key = keys.get(input.KeyId);
    if (!key) throw notFound(input.KeyId);
    expect(input.SigningAlgorithm).toBe('ECDSA_SHA_256');
    let message: Uint8Array = input.Message;
    if (input.MessageType === 'DIGEST') {
      const original = digested.get(Buffer.from(input.Message).toString('hex'));
      if (!original) throw new Error('test: unknown digest');
      message = original;
    } else {
      expect(input.MessageType).toBe('RAW');
      expect(message.byteLength).toBeLessThanOrEqual(4096);
    }
    // DER, as KMS answers.
    return { KeyId: input.KeyId, Signature: new Uint8Array(sign('sha256', message, key.privateKey)), SigningAlgorithm: 'ECDSA_SHA_256' };
  });
  kms.on(GetPublicKeyCommand).callsFake(async (input) => {
    const key = keys.get(input.KeyId);
    if (!key) throw notFound(input.KeyId);
    return {
      KeyId: input.KeyId,
      PublicKey: new Uint8Array(key.publicKey.export({ format: 'der', type: 'spki' })),
      KeySpec: 'ECC_NIST_P256',
      KeyUsage: 'SIGN_VERIFY',
      SigningAlgorithms: ['ECDSA_SHA_256'],
    };
  });
}

/** Lets the mock sign `data` when it arrives as a DIGEST. */
const allowDigestOf = (data: Uint8Array) => digested.set(createHash('sha256').update(data).digest('hex'), data);

signerContract('aws (KMS, mocked with real keys)', async () => {
  kms.reset();
  backWithRealKeys();
  // The contract's large message goes as a digest.
  allowDigestOf(new Uint8Array(5000).fill(7));
  let ids = [newKey()];
  const kmsClient = client();
  return {
    signer: new KmsSigner(kmsClient, ids),
    // A rotation on AWS is a new key put first in SIGNING_KEY_IDS; functions start with the new list.
    rotate: async () => {
      ids = [newKey(), ...ids];
      return new KmsSigner(kmsClient, ids);
    },
    retire: async (kid) => {
      ids = ids.filter((id) => id !== kid);
      return new KmsSigner(kmsClient, ids);
    },
    cleanup: async () => {
      kms.reset();
    },
  };
});

describe('KmsSigner (KMS mocked)', () => {
  beforeEach(() => {
    kms.reset();
    backWithRealKeys();
  });
  afterEach(() => kms.reset());

  const serviceError = (name: string, status: number, extra: Record<string, unknown> = {}) =>
    Object.assign(
      new KMSServiceException({ name, $fault: status >= 500 ? 'server' : 'client', $metadata: { httpStatusCode: status }, message: name }),
      extra,
    );

  it('signs with the first configured key id, RAW ECDSA_SHA_256, and names that id as the kid', async () => {
    const current = newKey();
    const older = newKey();
    const signer = new KmsSigner(client(), [current, older]);
    const data = new TextEncoder().encode('eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0');
    const { keyId, signature } = await signer.sign(data);
    expect(keyId).toBe(current);
    const calls = kms.commandCalls(SignCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0].args[0].input).toEqual({ KeyId: current, Message: data, MessageType: 'RAW', SigningAlgorithm: 'ECDSA_SHA_256' });
    expect(await verifiesWith(signer, keyId, data, signature)).toBe(true);
    expect((await signer.publicKeys()).map((k) => k.kid)).toEqual([current, older]);
  });

  it('sends a message over 4096 bytes as its SHA-256 digest', async () => {
    const id = newKey();
    const signer = new KmsSigner(client(), [id]);
    const data = randomBytes(4097);
    allowDigestOf(data);
    const { signature } = await signer.sign(data);
    const input = kms.commandCalls(SignCommand)[0].args[0].input;
    expect(input.MessageType).toBe('DIGEST');
    expect(Buffer.from(input.Message!).equals(createHash('sha256').update(data).digest())).toBe(true);
    expect(await verifiesWith(signer, id, data, signature)).toBe(true);
  });

  it('calls GetPublicKey once per key per instance, also when asked concurrently', async () => {
    const ids = [newKey(), newKey()];
    const signer = new KmsSigner(client(), ids);
    const [a, b] = await Promise.all([signer.publicKeys(), signer.publicKeys()]);
    expect(a).toEqual(b);
    await signer.publicKeys();
    await signer.sign(new Uint8Array([1]));
    const asked = kms.commandCalls(GetPublicKeyCommand).map((c) => c.args[0].input.KeyId);
    expect(asked.sort()).toEqual([...ids].sort());
  });

  it('does not cache a failed GetPublicKey', async () => {
    const id = newKey();
    const signer = new KmsSigner(client(), [id]);
    const backing = keys.get(id)!;
    kms.on(GetPublicKeyCommand).rejectsOnce(serviceError('ThrottlingException', 400)).resolves({
      KeyId: id,
      PublicKey: new Uint8Array(backing.publicKey.export({ format: 'der', type: 'spki' })),
      KeySpec: 'ECC_NIST_P256',
      KeyUsage: 'SIGN_VERIFY',
    });
    await expect(signer.publicKeys()).rejects.toBeInstanceOf(EngineUnavailableError);
    expect((await signer.publicKeys())[0].kid).toBe(id);
    expect(kms.commandCalls(GetPublicKeyCommand)).toHaveLength(2);
  });

  it.each([
    ['ThrottlingException', () => serviceError('ThrottlingException', 400)],
    ['KMSInternalException (500)', () => new KMSInternalException({ message: 'internal', $metadata: { httpStatusCode: 500 } })],
    ['DependencyTimeoutException (503)', () => serviceError('DependencyTimeoutException', 503)],
    ['a network error', () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })],
  ])('turns %s into EngineUnavailableError on Sign and GetPublicKey', async (_name, error) => {
    const id = newKey();
    kms.on(SignCommand).rejects(error());
    kms.on(GetPublicKeyCommand).rejects(error());
    const signer = new KmsSigner(client(), [id]);
    await expect(signer.sign(new Uint8Array([1]))).rejects.toBeInstanceOf(EngineUnavailableError);
    await expect(signer.publicKeys()).rejects.toBeInstanceOf(EngineUnavailableError);
  });

  it('leaves configuration errors as they are (missing or disabled key)', async () => {
    const signer = new KmsSigner(client(), ['arn:aws:kms:us-east-1:111122223333:key/missing']);
    const err = await signer.sign(new Uint8Array([1])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundException);
    expect(err).not.toBeInstanceOf(EngineUnavailableError);
    kms.on(SignCommand).rejects(new DisabledException({ message: 'disabled', $metadata: { httpStatusCode: 400 } }));
    await expect(signer.sign(new Uint8Array([1]))).rejects.toBeInstanceOf(DisabledException);
  });

  it('refuses a key that is not an EC P-256 signing key', async () => {
    const id = newKey();
    kms.on(GetPublicKeyCommand).resolves({
      KeyId: id,
      PublicKey: new Uint8Array(generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ format: 'der', type: 'spki' })),
    });
    await expect(new KmsSigner(client(), [id]).publicKeys()).rejects.toThrow(/P-256/);
    kms.on(GetPublicKeyCommand).resolves({ KeyId: id, PublicKey: new Uint8Array([1]), KeySpec: 'RSA_2048', KeyUsage: 'SIGN_VERIFY' });
    await expect(new KmsSigner(client(), [id]).publicKeys()).rejects.toThrow(/RSA_2048/);
  });

  it('needs at least one key id', () => {
    expect(() => new KmsSigner(client(), [])).toThrow(/key id/);
  });
});

describe('derToJose', () => {
  const der = (r: number[], s: number[]) => {
    const body = [0x02, r.length, ...r, 0x02, s.length, ...s];
    return Uint8Array.from([0x30, body.length, ...body]);
  };
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

  it('strips the sign byte of a high r and left-pads a short s', () => {
    const r = [0x00, 0x80, ...Array(31).fill(0x11)];
    const s = [0x01, 0x02];
    expect(hex(derToJose(der(r, s)))).toBe('80' + '11'.repeat(31) + '00'.repeat(30) + '0102');
  });

  it('agrees with node:crypto on real signatures, a short r or s among them', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    // r or s below 2^248 (a DER INTEGER under 32 bytes) comes about once in 128 signatures.
    let sawShort = false;
    for (let i = 0; i < 5000 && !(sawShort && i >= 200); i++) {
      const data = randomBytes(20);
      const derSig = sign('sha256', data, privateKey);
      const rLen = derSig[3];
      const sLen = derSig[5 + rLen];
      if (rLen < 32 || sLen < 32) sawShort = true;
      const jose = derToJose(derSig);
      expect(jose.length).toBe(64);
      expect(verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, jose)).toBe(true);
    }
    expect(sawShort).toBe(true);
  });

  it.each([
    ['empty', new Uint8Array()],
    ['not a SEQUENCE', Uint8Array.from([0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01])],
    ['wrong SEQUENCE length', Uint8Array.from([0x30, 0x07, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01])],
    ['trailing bytes', Uint8Array.from([0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x00])],
    ['negative integer', Uint8Array.from([0x30, 0x06, 0x02, 0x01, 0x81, 0x02, 0x01, 0x01])],
    ['r too large', der([0x01, ...Array(32).fill(0x22)], [0x01])],
    ['truncated', Uint8Array.from([0x30, 0x06, 0x02, 0x01, 0x01, 0x02])],
  ])('refuses %s', (_name, input) => {
    expect(() => derToJose(input)).toThrow(/malformed DER/);
  });
});
