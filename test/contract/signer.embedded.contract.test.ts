import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileSigner } from '../../lambdas/engine/embedded/signer.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { signerContract, verifiesWith } from './signer-contract.js';

signerContract('embedded (key file)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'signer-'));
  const signer = new FileSigner(join(dir, 'signing-keys.json'));
  return {
    signer,
    rotate: async () => {
      await signer.rotate();
      return signer;
    },
    retire: async (kid) => {
      await signer.retire(kid);
      return signer;
    },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

describe('FileSigner', () => {
  let dir: string;
  let path: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'signer-'));
    path = join(dir, 'keys', 'signing-keys.json');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const stored = () => JSON.parse(readFileSync(path, 'utf8')) as { kid: string; privateJwk: { d?: string }; publicJwk: { kid: string }; created_at: string }[];

  it('creates the file on first use with one P-256 key, mode 0600, and nothing else beside it', async () => {
    const signer = new FileSigner(path);
    expect(() => statSync(path)).toThrow();
    const [key] = await signer.publicKeys();
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const keys = stored();
    expect(keys).toHaveLength(1);
    expect(keys[0].kid).toBe(key.kid);
    expect(keys[0].kid).toMatch(/^k_[0-9a-f]{16}$/);
    expect(keys[0].publicJwk).toEqual(key);
    expect(typeof keys[0].privateJwk.d).toBe('string');
    expect(new Date(keys[0].created_at).toISOString()).toBe(keys[0].created_at);
    expect(readdirSync(join(dir, 'keys'))).toEqual(['signing-keys.json']);
  });

  it('keeps mode 0600 and leaves no temp files across rotate and retire', async () => {
    const signer = new FileSigner(path);
    const first = (await signer.publicKeys())[0].kid;
    await signer.rotate();
    await signer.retire(first);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(dir, 'keys'))).toEqual(['signing-keys.json']);
  });

  it('keeps its keys across instances; concurrent first uses agree on one key', async () => {
    const a = new FileSigner(path);
    const b = new FileSigner(path);
    const [ka, kb] = await Promise.all([a.publicKeys(), b.publicKeys()]);
    expect(ka).toEqual(kb);
    expect(stored()).toHaveLength(1);
    const again = new FileSigner(path);
    const data = new TextEncoder().encode('persisted');
    const { keyId, signature } = await a.sign(data);
    expect(await verifiesWith(again, keyId, data, signature)).toBe(true);
  });

  it('a second FileSigner on the same file sees a rotation and a retirement (the admin CLI case)', async () => {
    const server = new FileSigner(path);
    const cli = new FileSigner(path);
    const old = (await server.sign(new Uint8Array([1]))).keyId;
    const rotated = await cli.rotate();
    expect((await server.sign(new Uint8Array([1]))).keyId).toBe(rotated.kid);
    expect((await server.publicKeys()).map((k) => k.kid)).toEqual([rotated.kid, old]);
    await cli.retire(old);
    expect((await server.publicKeys()).map((k) => k.kid)).toEqual([rotated.kid]);
  });

  it('rotates many times in a row; concurrent rotations all land', async () => {
    const signer = new FileSigner(path);
    await signer.publicKeys();
    await Promise.all([signer.rotate(), signer.rotate(), signer.rotate()]);
    const keys = await signer.publicKeys();
    expect(keys).toHaveLength(4);
    expect(new Set(keys.map((k) => k.kid)).size).toBe(4);
  });

  it('refuses to retire the current key or an unknown one', async () => {
    const signer = new FileSigner(path);
    const [current] = await signer.publicKeys();
    await expect(signer.retire(current.kid)).rejects.toThrow(/current key/);
    await expect(signer.retire('k_0000000000000000')).rejects.toThrow(/no signing key/);
    expect(await signer.publicKeys()).toEqual([current]);
  });

  it('lists keys without their private parts', async () => {
    const signer = new FileSigner(path);
    await signer.rotate();
    const listed = await signer.list();
    expect(listed).toHaveLength(2);
    expect(JSON.stringify(listed)).not.toContain('"d"');
    expect(listed.map((k) => k.kid)).toEqual((await signer.publicKeys()).map((k) => k.kid));
  });

  it('refuses a damaged key file instead of replacing it', async () => {
    const signer = new FileSigner(path);
    await signer.publicKeys();
    writeFileSync(path, '{"not": "keys"}');
    await expect(new FileSigner(path).publicKeys()).rejects.toThrow(/signing keys/);
    await expect(signer.sign(new Uint8Array([1]))).rejects.toThrow(/signing keys/);
    expect(readFileSync(path, 'utf8')).toBe('{"not": "keys"}');
  });

  it('is the embedded engine signer, keyed under DATA_DIR', async () => {
    const engine = createEmbeddedEngine({ dataDir: join(dir, 'data') });
    try {
      const [key] = await engine.signer.publicKeys();
      expect(statSync(join(dir, 'data', 'signing-keys.json')).mode & 0o777).toBe(0o600);
      expect(await new FileSigner(join(dir, 'data', 'signing-keys.json')).publicKeys()).toEqual([key]);
    } finally {
      await engine.close();
    }
  });
});
