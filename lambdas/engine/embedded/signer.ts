/**
 * Signer on a key file (embedded engine), e.g. `DATA_DIR/signing-keys.json`.
 *
 * The file (mode 0600) holds a JSON array `{ kid, privateJwk, publicJwk, created_at }[]`, newest
 * first: the first key signs, every key verifies. It is created with one fresh P-256 key on first
 * use and always replaced whole (temp file + rename), so a reader never sees half a file. Parsed keys
 * are cached and the file is read again when it changes, so a rotation by the admin CLI reaches a
 * running server without a restart.
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, sign, type JsonWebKey, type KeyObject } from 'node:crypto';
import { chmod, link, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { PublicJwk, Signer } from '../ports.js';

export interface StoredSigningKey {
  kid: string;
  /** EC P-256 private key as a JWK (`d` included). Never leaves this file and this process. */
  privateJwk: JsonWebKey;
  publicJwk: PublicJwk;
  /** ISO 8601. */
  created_at: string;
}

interface Loaded {
  /** Identity of the file version these keys came from (inode, mtime, size). */
  version: string;
  keys: StoredSigningKey[];
  privateKeys: Map<string, KeyObject>;
}

const FILE_MODE = 0o600;

export class FileSigner implements Signer {
  private loaded?: Loaded;
  /** Serialises this process's writes (first-use creation, rotate, retire). */
  private writing: Promise<unknown> = Promise.resolve();

  constructor(private readonly path: string) {}

  async sign(data: Uint8Array): Promise<{ keyId: string; signature: Uint8Array }> {
    const { keys, privateKeys } = await this.current();
    const kid = keys[0].kid;
    const signature = sign('sha256', data, { key: privateKeys.get(kid)!, dsaEncoding: 'ieee-p1363' });
    return { keyId: kid, signature: new Uint8Array(signature) };
  }

  async publicKeys(): Promise<PublicJwk[]> {
    return (await this.current()).keys.map((k) => ({ ...k.publicJwk }));
  }

  /** The keys without their private parts, newest (current) first: for the admin CLI to list. */
  async list(): Promise<{ kid: string; created_at: string; publicJwk: PublicJwk }[]> {
    return (await this.current()).keys.map((k) => ({ kid: k.kid, created_at: k.created_at, publicJwk: { ...k.publicJwk } }));
  }

  /** Adds a new current key; older keys keep verifying until retired. Returns the new public key. */
  rotate(): Promise<PublicJwk> {
    return this.exclusive(async () => {
      const { keys } = await this.current();
      const key = newKey(new Set(keys.map((k) => k.kid)));
      await this.write([key, ...keys]);
      return { ...key.publicJwk };
    });
  }

  /** Removes an older key: tokens it signed stop verifying. The current key cannot be retired. */
  retire(kid: string): Promise<void> {
    return this.exclusive(async () => {
      const { keys } = await this.current();
      const index = keys.findIndex((k) => k.kid === kid);
      if (index < 0) throw new Error(`no signing key ${kid}`);
      if (index === 0) throw new Error(`signing key ${kid} is the current key; rotate first, then retire it`);
      await this.write(keys.filter((k) => k.kid !== kid));
    });
  }

  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.writing.then(task, task);
    this.writing = run.catch(() => undefined);
    return run;
  }

  /** The keys as the file holds them now: re-read only when the file changed. */
  private async current(): Promise<Loaded> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const info = await stat(this.path, { bigint: true }).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return undefined;
        throw error;
      });
      if (!info) {
        // Not under `exclusive`: rotate and retire call this while holding it. Creation never
        // replaces an existing file, so racing creators agree on whichever file came first.
        await this.createIfMissing();
        continue;
      }
      const version = `${info.ino}:${info.mtimeNs}:${info.size}`;
      if (this.loaded?.version === version) return this.loaded;
      let text: string;
      try {
        text = await readFile(this.path, 'utf8');
      } catch (error) {
        // Replaced between stat and read (a rotation elsewhere): look again.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      const keys = parseKeys(text, this.path);
      const privateKeys = new Map(keys.map((k) => [k.kid, createPrivateKey({ key: k.privateJwk, format: 'jwk' })]));
      this.loaded = { version, keys, privateKeys };
      return this.loaded;
    }
    throw new Error(`${this.path}: the signing key file keeps disappearing`);
  }

  /** First use: one fresh key. Never replaces a file another process created in the meantime. */
  private async createIfMissing(): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    const tmp = await this.writeTemp([newKey(new Set())]);
    try {
      await link(tmp, this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  private async write(keys: StoredSigningKey[]): Promise<void> {
    const tmp = await this.writeTemp(keys);
    try {
      await rename(tmp, this.path);
    } catch (error) {
      await unlink(tmp).catch(() => undefined);
      throw error;
    }
    this.loaded = undefined;
  }

  private async writeTemp(keys: StoredSigningKey[]): Promise<string> {
    const tmp = `${this.path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(tmp, `${JSON.stringify(keys, null, 2)}\n`, { mode: FILE_MODE, flag: 'wx', flush: true });
    await chmod(tmp, FILE_MODE); // in case the umask took bits away from the owner
    return tmp;
  }
}

function newKey(taken: ReadonlySet<string>): StoredSigningKey {
  let kid: string;
  do kid = `k_${randomBytes(8).toString('hex')}`;
  while (taken.has(kid));
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pub = publicKey.export({ format: 'jwk' });
  return {
    kid,
    privateJwk: privateKey.export({ format: 'jwk' }),
    publicJwk: { kty: 'EC', crv: 'P-256', x: pub.x!, y: pub.y!, kid, alg: 'ES256', use: 'sig' },
    created_at: new Date().toISOString(),
  };
}

function parseKeys(text: string, path: string): StoredSigningKey[] {
  let keys: unknown;
  try {
    keys = JSON.parse(text);
  } catch {
    throw new Error(`${path}: not JSON`);
  }
  if (!Array.isArray(keys) || keys.length === 0) throw new Error(`${path}: expected a non-empty array of signing keys`);
  for (const k of keys as StoredSigningKey[]) {
    const ok =
      typeof k?.kid === 'string' &&
      k.privateJwk?.kty === 'EC' &&
      k.privateJwk.crv === 'P-256' &&
      typeof k.privateJwk.d === 'string' &&
      k.publicJwk?.kty === 'EC' &&
      k.publicJwk.crv === 'P-256' &&
      k.publicJwk.kid === k.kid &&
      k.publicJwk.x === k.privateJwk.x &&
      k.publicJwk.y === k.privateJwk.y;
    if (!ok) throw new Error(`${path}: malformed signing key ${typeof k?.kid === 'string' ? k.kid : ''}`.trimEnd());
  }
  return keys as StoredSigningKey[];
}
