/**
 * The server secret on both engines: the key file (real files, concurrent first use) and Secrets
 * Manager (mocked: it cannot run here), and the cursor sealing built on it.
 */
import { createCipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { GetSecretValueCommand, ResourceNotFoundException, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { FileSecret } from '../../lambdas/engine/embedded/secret.js';
import { SecretsManagerSecret } from '../../lambdas/engine/aws/secret.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';
import { InvalidCursorError, openCursor, sealCursor } from '../../lambdas/shared/cursors.js';
import { derivedKey } from '../../lambdas/shared/server-keys.js';

describe('FileSecret (embedded engine)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'secret-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('makes one 32-byte secret, mode 0600, however many processes ask first at once', async () => {
    const path = join(dir, 'keys', 'server-secret.key');
    const secrets = await Promise.all(Array.from({ length: 12 }, () => new FileSecret(path).get()));
    for (const s of secrets) expect(Buffer.from(s)).toEqual(Buffer.from(secrets[0]));
    expect(secrets[0].byteLength).toBe(32);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(Buffer.from(await new FileSecret(path).get())).toEqual(Buffer.from(secrets[0]));
  });

  it('refuses a file too short to be a secret instead of using it', async () => {
    const path = join(dir, 'server-secret.key');
    writeFileSync(path, 'short');
    await expect(new FileSecret(path).get()).rejects.toThrow(/at least 32 bytes/);
  });
});

describe('SecretsManagerSecret (aws engine)', () => {
  const sm = mockClient(SecretsManagerClient);
  const ARN = 'arn:aws:secretsmanager:us-east-1:111122223333:secret:server-AbCdEf';
  beforeEach(() => sm.reset());

  it('reads the secret once per container and returns its bytes', async () => {
    sm.on(GetSecretValueCommand, { SecretId: ARN }).resolves({ SecretString: 'k'.repeat(64) });
    const secret = new SecretsManagerSecret(new SecretsManagerClient({ region: 'us-east-1' }), ARN);
    const [a, b] = await Promise.all([secret.get(), secret.get()]);
    expect(Buffer.from(a).toString()).toBe('k'.repeat(64));
    expect(b).toBe(a);
    await secret.get();
    expect(sm.commandCalls(GetSecretValueCommand)).toHaveLength(1);
  });

  it('takes a binary secret, refuses a short one, and does not cache a failure', async () => {
    sm.on(GetSecretValueCommand).resolvesOnce({ SecretString: 'short' }).rejectsOnce(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException', $fault: 'client', $metadata: { httpStatusCode: 400 } })).resolves({ SecretBinary: new Uint8Array(48).fill(7) });
    const secret = new SecretsManagerSecret(new SecretsManagerClient({ region: 'us-east-1' }), ARN);
    await expect(secret.get()).rejects.toThrow(/fewer than 32 bytes/);
    await expect(secret.get()).rejects.toBeInstanceOf(EngineUnavailableError);
    expect((await secret.get()).byteLength).toBe(48);
  });

  it('passes a missing secret on as what it is: a configuration error', async () => {
    sm.on(GetSecretValueCommand).rejects(new ResourceNotFoundException({ message: 'Secrets Manager can\'t find the specified secret.', $metadata: { httpStatusCode: 400 } }));
    const secret = new SecretsManagerSecret(new SecretsManagerClient({ region: 'us-east-1' }), ARN);
    await expect(secret.get()).rejects.toBeInstanceOf(ResourceNotFoundException);
  });
});

describe('sealed cursors', () => {
  const secret = { get: async () => new Uint8Array(32).fill(1) };
  const other = { get: async () => new Uint8Array(32).fill(2) };

  it('open to what was sealed, for the same binding and key only', async () => {
    const state = { r: 2, c: 'position' };
    const cursor = await sealCursor(secret, state, 'query A');
    expect(await openCursor(secret, cursor, 'query A')).toEqual(state);
    await expect(openCursor(secret, cursor, 'query B')).rejects.toBeInstanceOf(InvalidCursorError);
    await expect(openCursor(other, cursor, 'query A')).rejects.toBeInstanceOf(InvalidCursorError);
    // Two seals of one state differ (a fresh nonce each time) and lengths move in steps of the padding.
    expect(await sealCursor(secret, state, 'query A')).not.toBe(cursor);
    expect((await sealCursor(secret, { r: 2, c: 'p' }, 'query A')).length).toBe(cursor.length);
  });

  it('refuses every flipped bit', async () => {
    const cursor = await sealCursor(secret, { r: 0, c: 'x'.repeat(40) }, 'b');
    const bytes = Buffer.from(cursor, 'base64url');
    for (let i = 0; i < bytes.length; i++) {
      for (const bit of [0x01, 0x80]) {
        const bad = Buffer.from(bytes);
        bad[i] ^= bit;
        await expect(openCursor(secret, bad.toString('base64url'), 'b'), `byte ${i}`).rejects.toBeInstanceOf(InvalidCursorError);
      }
    }
  });
});

describe('derived keys (shared/server-keys.ts)', () => {
  it('are HKDF-SHA-256 (empty salt, the purpose as info), one per purpose, loaded once per purpose', async () => {
    let loads = 0;
    const secret = { get: async () => (loads++, new Uint8Array(32).fill(3)) };
    const [a, b, c] = await Promise.all([derivedKey(secret, 'purpose a'), derivedKey(secret, 'purpose a'), derivedKey(secret, 'purpose b')]);
    expect(a).toEqual(Buffer.from(hkdfSync('sha256', new Uint8Array(32).fill(3), Buffer.alloc(0), 'purpose a', 32)));
    expect(a).toHaveLength(32);
    expect(b).toBe(a);
    expect(c).not.toEqual(a);
    expect(await derivedKey(secret, 'purpose a')).toBe(a);
    expect(loads).toBe(2);
    // Another secret object has its own keys.
    expect(await derivedKey({ get: async () => new Uint8Array(32).fill(4) }, 'purpose a')).not.toEqual(a);
  });

  it('do not cache a failed load', async () => {
    let calls = 0;
    const secret = {
      get: async () => {
        calls++;
        if (calls === 1) throw new Error('not yet');
        return new Uint8Array(32).fill(5);
      },
    };
    await expect(derivedKey(secret, 'p')).rejects.toThrow('not yet');
    expect(await derivedKey(secret, 'p')).toHaveLength(32);
    expect(calls).toBe(2);
  });

  it('leave the cursor key as it was: a cursor sealed the way it always was still opens', async () => {
    const raw = new Uint8Array(32).fill(6);
    const secret = { get: async () => raw };
    // The derivation and the format before the refactor, written out here.
    const key = Buffer.from(hkdfSync('sha256', raw, Buffer.alloc(0), 'platform cursor key v1', 32));
    expect(await derivedKey(secret, 'platform cursor key v1')).toEqual(key);
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.concat([Buffer.of(1), Buffer.from('binding', 'utf8')]));
    const plain = Buffer.from(JSON.stringify({ r: 1, c: 'old' }).padEnd(32, ' '), 'utf8');
    const cursor = Buffer.concat([Buffer.of(1), iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]).toString('base64url');
    expect(await openCursor(secret, cursor, 'binding')).toEqual({ r: 1, c: 'old' });
  });
});
