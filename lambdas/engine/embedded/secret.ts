/**
 * The server secret on a key file (embedded engine), `DATA_DIR/server-secret.key`: 32 random bytes,
 * mode 0600, made on first use. Every local worker shares it; it survives restarts, so cursors given
 * out before a restart still work after it.
 */
import { randomBytes } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { ServerSecret } from '../ports.js';
import { memoUntilFailure } from '../adapter-kit/memo.js';

const SECRET_BYTES = 32;

export class FileSecret implements ServerSecret {
  constructor(private readonly path: string) {}

  readonly get = memoUntilFailure(() => this.load());

  private async load(): Promise<Uint8Array> {
    const existing = await this.read();
    if (existing) return existing;
    // Written whole to a private temp file, then linked into place: link refuses to replace, so of two
    // workers starting together one secret wins and both read it; nobody ever reads half a file.
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    const temp = `${this.path}.${process.pid}.${randomBytes(6).toString('hex')}`;
    await writeFile(temp, randomBytes(SECRET_BYTES), { mode: 0o600, flag: 'wx' });
    try {
      await link(temp, this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      await unlink(temp);
    }
    const written = await this.read();
    if (!written) throw new Error(`${this.path}: the server secret could not be made`);
    return written;
  }

  private async read(): Promise<Uint8Array | undefined> {
    try {
      const bytes = await readFile(this.path);
      if (bytes.length < SECRET_BYTES) throw new Error(`${this.path}: a server secret is at least ${SECRET_BYTES} bytes; delete the file to make a new one`);
      return new Uint8Array(bytes);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }
}
