/**
 * The blob store contract. Every adapter runs it (see blob.*.contract.test.ts); what passes here
 * behaves the same on the filesystem and on S3, expectations and multipart limits included.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { describe, expect, it, beforeEach, afterEach } from 'vitest';
import type { BlobStore } from '../../lambdas/engine/ports.js';
import { BlobMismatchError, EngineLimitError, InvalidPartError, UploadNotFoundError } from '../../lambdas/engine/errors.js';

export interface BlobFixture {
  blobs: BlobStore;
  cleanup(): Promise<void>;
}

export interface BlobContractOptions {
  /** s3rver has no AbortMultipartUpload: the AWS adapter's abort is covered with a client mock. */
  abortMultipart: boolean;
  /**
   * Whether the store compares the listed part etags on completion (S3 answers InvalidPart). s3rver
   * does not: it joins whatever files it has under the listed numbers. The AWS adapter's translation
   * of InvalidPart is covered with a client mock.
   */
  partEtags: boolean;
  /** s3rver has no ListParts (it answers 405): the AWS adapter's paging of ListParts is covered with a client mock. */
  listParts: boolean;
}

const MiB = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** `size` deterministic pseudo-random bytes (seeded), so parts and bodies differ from one another. */
function bytes(size: number, seed = 1): Buffer {
  const out = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** A stream of the given buffers, one chunk each. */
const streamOf = (...chunks: Uint8Array[]) => Readable.from(chunks.map((c) => Buffer.from(c)));

/**
 * A stream of `size` bytes generated chunk by chunk (64 KiB at a time): never held whole in memory.
 * Deterministic, so two streams with the same arguments carry the same bytes.
 */
function generated(size: number, seed = 7): Readable {
  const chunk = 64 * 1024;
  async function* gen() {
    for (let offset = 0, i = 0; offset < size; offset += chunk, i++) {
      const block = bytes(Math.min(chunk, size - offset), seed + i);
      yield block;
    }
  }
  return Readable.from(gen());
}

/** Hashes a stream without keeping it. */
async function digest(stream: Readable): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).byteLength;
  }
  return { size, sha256: hash.digest('hex') };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function blobContract(name: string, setup: () => Promise<BlobFixture>, options: BlobContractOptions) {
  describe(`blob store contract: ${name}`, () => {
    let f: BlobFixture;
    let prefix: string;
    let n = 0;
    beforeEach(async () => {
      f = await setup();
      prefix = `t${Date.now()}-${n++}`; // fresh prefix per test, so adapters may share a bucket
    });
    afterEach(async () => f.cleanup());

    const stored = async (key: string) => {
      const got = await f.blobs.get(key);
      if (!got) return undefined;
      return { size: got.size, bytes: await readAll(got.body) };
    };

    const mismatch = async (promise: Promise<unknown>, kind: 'sha256' | 'size', actual?: { size: number; sha256: string }) => {
      const err = await promise.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(BlobMismatchError);
      expect((err as BlobMismatchError).mismatch).toBe(kind);
      if (actual) expect((err as BlobMismatchError).actual).toEqual(actual);
    };

    const limit = async (promise: Promise<unknown>) => {
      const err = await promise.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(EngineLimitError);
      expect((err as EngineLimitError).limit).toBe('multipart_part');
    };

    const invalidPart = async (promise: Promise<unknown>) => {
      const err = await promise.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidPartError);
    };

    // ---------- put / get / head / delete ----------

    it('puts a Uint8Array and returns its size and lowercase hex SHA-256; get streams it back, head sizes it', async () => {
      const key = `${prefix}/docs/a.bin`;
      const body = new Uint8Array(bytes(1000, 3));
      const result = await f.blobs.put(key, body);
      expect(result).toEqual({ size: 1000, sha256: sha256(body) });
      expect(result.sha256).toMatch(/^[0-9a-f]{64}$/);
      const got = await stored(key);
      expect(got?.size).toBe(1000);
      expect(got?.bytes.equals(Buffer.from(body))).toBe(true);
      expect(await f.blobs.head(key)).toEqual({ size: 1000 });
    });

    it('puts a Readable stream, with and without expectations', async () => {
      const a = bytes(70_000, 4);
      const b = bytes(123, 5);
      const whole = Buffer.concat([a, b]);
      const expected = { size: whole.length, sha256: sha256(whole) };

      expect(await f.blobs.put(`${prefix}/plain`, streamOf(a, b))).toEqual(expected);
      expect(await f.blobs.put(`${prefix}/sized`, streamOf(a, b), { size: whole.length })).toEqual(expected);
      expect(await f.blobs.put(`${prefix}/both`, streamOf(a, b), expected)).toEqual(expected);
      expect(await f.blobs.put(`${prefix}/hashed`, streamOf(a, b), { sha256: expected.sha256.toUpperCase() })).toEqual(expected);
      for (const k of ['plain', 'sized', 'both', 'hashed']) {
        const got = await stored(`${prefix}/${k}`);
        expect(got?.size).toBe(whole.length);
        expect(got?.bytes.equals(whole)).toBe(true);
      }
    });

    it('stores an empty body', async () => {
      const empty = { size: 0, sha256: sha256(new Uint8Array()) };
      expect(await f.blobs.put(`${prefix}/e1`, new Uint8Array())).toEqual(empty);
      expect(await f.blobs.put(`${prefix}/e2`, streamOf())).toEqual(empty);
      expect(await f.blobs.head(`${prefix}/e1`)).toEqual({ size: 0 });
      expect((await stored(`${prefix}/e2`))?.bytes.length).toBe(0);
    });

    it('replaces an object put again under the same key', async () => {
      const key = `${prefix}/same`;
      await f.blobs.put(key, bytes(10, 1));
      await f.blobs.put(key, streamOf(bytes(20, 2)));
      expect((await stored(key))?.bytes.equals(bytes(20, 2))).toBe(true);
    });

    it('keeps keys apart that nest inside one another', async () => {
      await f.blobs.put(`${prefix}/a`, bytes(1, 1));
      await f.blobs.put(`${prefix}/a/b`, bytes(2, 2));
      await f.blobs.put(`${prefix}/a/b/c d+é.txt`, bytes(3, 3));
      expect(await f.blobs.head(`${prefix}/a`)).toEqual({ size: 1 });
      expect(await f.blobs.head(`${prefix}/a/b`)).toEqual({ size: 2 });
      expect(await f.blobs.head(`${prefix}/a/b/c d+é.txt`)).toEqual({ size: 3 });
      expect(await f.blobs.head(`${prefix}/A`)).toBeUndefined();
    });

    it('answers undefined for a missing key and deletes (a missing key is fine)', async () => {
      const key = `${prefix}/gone`;
      expect(await f.blobs.get(key)).toBeUndefined();
      expect(await f.blobs.head(key)).toBeUndefined();
      await f.blobs.put(key, bytes(5));
      await f.blobs.delete(key);
      expect(await f.blobs.head(key)).toBeUndefined();
      expect(await f.blobs.get(key)).toBeUndefined();
      await f.blobs.delete(key);
      await f.blobs.delete(`${prefix}/never/was`);
    });

    // ---------- expectations ----------

    it('keeps nothing when the SHA-256 does not match, and leaves an existing object in place', async () => {
      const body = bytes(5000, 8);
      const actual = { size: body.length, sha256: sha256(body) };
      const wrong = sha256(Buffer.from('something else'));

      await mismatch(f.blobs.put(`${prefix}/new-a`, new Uint8Array(body), { sha256: wrong }), 'sha256', actual);
      await mismatch(f.blobs.put(`${prefix}/new-b`, streamOf(body.subarray(0, 100), body.subarray(100)), { sha256: wrong }), 'sha256', actual);
      await mismatch(f.blobs.put(`${prefix}/new-c`, streamOf(body), { sha256: wrong, size: body.length }), 'sha256', actual);
      expect(await f.blobs.head(`${prefix}/new-a`)).toBeUndefined();
      expect(await f.blobs.head(`${prefix}/new-b`)).toBeUndefined();
      expect(await f.blobs.head(`${prefix}/new-c`)).toBeUndefined();

      const key = `${prefix}/existing`;
      const original = bytes(300, 9);
      await f.blobs.put(key, original);
      await mismatch(f.blobs.put(key, streamOf(body), { sha256: wrong }), 'sha256');
      await mismatch(f.blobs.put(key, new Uint8Array(body), { sha256: wrong }), 'sha256');
      const got = await stored(key);
      expect(got?.size).toBe(300);
      expect(got?.bytes.equals(original)).toBe(true);
    });

    it('keeps nothing when the size does not match (shorter or longer), and leaves an existing object in place', async () => {
      const body = bytes(4096, 10);
      const actual = { size: body.length, sha256: sha256(body) };

      await mismatch(f.blobs.put(`${prefix}/short`, streamOf(body.subarray(0, 1000), body.subarray(1000)), { size: 5000 }), 'size', actual);
      await mismatch(f.blobs.put(`${prefix}/long`, streamOf(body.subarray(0, 1000), body.subarray(1000)), { size: 3000 }), 'size', actual);
      await mismatch(f.blobs.put(`${prefix}/array`, new Uint8Array(body), { size: 4095 }), 'size', actual);
      await mismatch(f.blobs.put(`${prefix}/unsized`, streamOf(body), { size: 4097, sha256: actual.sha256 }), 'size', actual);
      for (const k of ['short', 'long', 'array', 'unsized']) expect(await f.blobs.head(`${prefix}/${k}`)).toBeUndefined();

      const key = `${prefix}/existing`;
      const original = bytes(300, 11);
      await f.blobs.put(key, original);
      await mismatch(f.blobs.put(key, streamOf(body), { size: 1 }), 'size');
      await mismatch(f.blobs.put(key, streamOf(body), { size: 10_000 }), 'size');
      expect((await stored(key))?.bytes.equals(original)).toBe(true);
    });

    it('keeps nothing when the body stream fails part way, and rethrows its error', async () => {
      const failing = (after: Buffer) =>
        Readable.from(
          (async function* () {
            yield after;
            throw new Error('source broke');
          })(),
        );
      const key = `${prefix}/broken`;
      await expect(f.blobs.put(key, failing(bytes(1000)))).rejects.toThrow('source broke');
      await expect(f.blobs.put(key, failing(bytes(1000)), { size: 2000 })).rejects.toThrow('source broke');
      expect(await f.blobs.head(key)).toBeUndefined();
      await f.blobs.put(key, bytes(5, 1));
      await expect(f.blobs.put(key, failing(bytes(1000)))).rejects.toThrow('source broke');
      expect((await stored(key))?.bytes.equals(bytes(5, 1))).toBe(true);
    });

    // ---------- streaming ----------

    it('streams a ~20 MiB body generated chunk by chunk, checking it against its SHA-256', async () => {
      const size = 20 * MiB + 12_345;
      const expected = await digest(generated(size)); // same bytes, generated again below
      expect(expected.size).toBe(size);

      expect(await f.blobs.put(`${prefix}/big`, generated(size), { sha256: expected.sha256 })).toEqual(expected);
      expect(await f.blobs.put(`${prefix}/big-sized`, generated(size), expected)).toEqual(expected);
      for (const k of ['big', 'big-sized']) {
        const got = await f.blobs.get(`${prefix}/${k}`);
        expect(got?.size).toBe(size);
        expect(await digest(got!.body)).toEqual(expected);
      }
      await mismatch(f.blobs.put(`${prefix}/big-wrong`, generated(size), { sha256: sha256(Buffer.from('x')) }), 'sha256', expected);
      expect(await f.blobs.head(`${prefix}/big-wrong`)).toBeUndefined();
    });

    // ---------- multipart ----------

    it('joins multipart parts in order and returns the SHA-256 and size of the whole', async () => {
      const key = `${prefix}/multi/file.bin`;
      const p1 = bytes(5 * MiB, 21);
      const p2 = bytes(5 * MiB + 17, 22);
      const p3 = bytes(1234, 23);
      const whole = Buffer.concat([p1, p2, p3]);
      const expected = { size: whole.length, sha256: sha256(whole) };

      const uploadId = await f.blobs.createMultipart(key);
      expect(typeof uploadId).toBe('string');
      // Out of order on purpose: the part number decides the position.
      const r3 = await f.blobs.uploadPart(key, uploadId, 3, streamOf(p3.subarray(0, 1000), p3.subarray(1000)), p3.length);
      const r1 = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(p1));
      const r2 = await f.blobs.uploadPart(key, uploadId, 2, streamOf(p2), p2.length);
      expect(r1.size).toBe(p1.length);
      expect(r2.size).toBe(p2.length);
      expect(r3.size).toBe(p3.length);
      expect(new Set([r1.etag, r2.etag, r3.etag]).size).toBe(3);
      expect(await f.blobs.head(key)).toBeUndefined(); // nothing visible before completion

      const result = await f.blobs.completeMultipart(
        key,
        uploadId,
        [
          { partNumber: 1, etag: r1.etag },
          { partNumber: 2, etag: r2.etag },
          { partNumber: 3, etag: r3.etag },
        ],
        expected,
      );
      expect(result).toEqual(expected);
      const got = await f.blobs.get(key);
      expect(got?.size).toBe(whole.length);
      expect(await digest(got!.body)).toEqual(expected);
    });

    it('completes a single small part (the last part may be small)', async () => {
      const key = `${prefix}/one-part`;
      const body = bytes(10, 30);
      const uploadId = await f.blobs.createMultipart(key);
      const { etag } = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(body));
      expect(await f.blobs.completeMultipart(key, uploadId, [{ partNumber: 1, etag }])).toEqual({ size: 10, sha256: sha256(body) });
      expect((await stored(key))?.bytes.equals(body)).toBe(true);
    });

    it('keeps nothing when the completed object does not match the expected SHA-256 or size', async () => {
      const key = `${prefix}/multi-wrong`;
      const original = bytes(100, 40);
      await f.blobs.put(key, original);

      const p1 = bytes(5 * MiB, 41);
      const p2 = bytes(10, 42);
      const actual = { size: p1.length + p2.length, sha256: sha256(Buffer.concat([p1, p2])) };
      for (const [kind, expectation] of [
        ['sha256', { sha256: sha256(p1) }],
        ['size', { size: p1.length }],
      ] as const) {
        const uploadId = await f.blobs.createMultipart(key);
        const a = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(p1));
        const b = await f.blobs.uploadPart(key, uploadId, 2, new Uint8Array(p2));
        await mismatch(
          f.blobs.completeMultipart(
            key,
            uploadId,
            [
              { partNumber: 1, etag: a.etag },
              { partNumber: 2, etag: b.etag },
            ],
            expectation,
          ),
          kind,
          actual,
        );
        const got = await stored(key);
        expect(got?.bytes.equals(original)).toBe(true);
      }

      const fresh = `${prefix}/multi-wrong-fresh`;
      const uploadId = await f.blobs.createMultipart(fresh);
      const a = await f.blobs.uploadPart(fresh, uploadId, 1, new Uint8Array(p2));
      await mismatch(f.blobs.completeMultipart(fresh, uploadId, [{ partNumber: 1, etag: a.etag }], { sha256: sha256(p1) }), 'sha256');
      expect(await f.blobs.head(fresh)).toBeUndefined();
    });

    it('refuses a part under 5 MiB that is not the last, at completion', async () => {
      const key = `${prefix}/small-parts`;
      const uploadId = await f.blobs.createMultipart(key);
      const a = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(bytes(5 * MiB - 1, 50)));
      const b = await f.blobs.uploadPart(key, uploadId, 2, new Uint8Array(bytes(100, 51)));
      await limit(
        f.blobs.completeMultipart(key, uploadId, [
          { partNumber: 1, etag: a.etag },
          { partNumber: 2, etag: b.etag },
        ]),
      );
      expect(await f.blobs.head(key)).toBeUndefined();
    });

    it('refuses part numbers outside 1..10000', async () => {
      const key = `${prefix}/part-numbers`;
      const uploadId = await f.blobs.createMultipart(key);
      for (const partNumber of [0, -1, 10_001, 1.5]) {
        await limit(f.blobs.uploadPart(key, uploadId, partNumber, new Uint8Array(bytes(10))));
      }
      const ok = await f.blobs.uploadPart(key, uploadId, 10_000, new Uint8Array(bytes(10)));
      await limit(f.blobs.completeMultipart(key, uploadId, [{ partNumber: 10_001, etag: ok.etag }]));
      expect(await f.blobs.completeMultipart(key, uploadId, [{ partNumber: 10_000, etag: ok.etag }])).toEqual({
        size: 10,
        sha256: sha256(bytes(10)),
      });
    });

    it('refuses parts listed out of order, or twice, with InvalidPartError; the upload stays open', async () => {
      const key = `${prefix}/part-order`;
      const uploadId = await f.blobs.createMultipart(key);
      const a = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(bytes(10, 60)));
      const b = await f.blobs.uploadPart(key, uploadId, 2, new Uint8Array(bytes(10, 61)));
      await invalidPart(
        f.blobs.completeMultipart(key, uploadId, [
          { partNumber: 2, etag: b.etag },
          { partNumber: 1, etag: a.etag },
        ]),
      );
      await invalidPart(
        f.blobs.completeMultipart(key, uploadId, [
          { partNumber: 1, etag: a.etag },
          { partNumber: 1, etag: a.etag },
        ]),
      );
      expect(await f.blobs.head(key)).toBeUndefined();
      // Still open: a list S3 accepts (a subset of the parts) completes it.
      expect(await f.blobs.completeMultipart(key, uploadId, [{ partNumber: 1, etag: a.etag }])).toEqual({
        size: 10,
        sha256: sha256(bytes(10, 60)),
      });
    });

    it.skipIf(!options.partEtags)('refuses a wrong part etag or a part never uploaded with InvalidPartError; the upload stays open', async () => {
      const key = `${prefix}/part-etags`;
      const uploadId = await f.blobs.createMultipart(key);
      const a = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(bytes(10, 62)));
      const b = await f.blobs.uploadPart(key, uploadId, 2, new Uint8Array(bytes(10, 63)));
      await invalidPart(f.blobs.completeMultipart(key, uploadId, [{ partNumber: 1, etag: b.etag }])); // another part's etag
      await invalidPart(f.blobs.completeMultipart(key, uploadId, [{ partNumber: 1, etag: 'not-an-etag' }]));
      await invalidPart(f.blobs.completeMultipart(key, uploadId, [{ partNumber: 3, etag: a.etag }])); // never uploaded
      expect(await f.blobs.head(key)).toBeUndefined();
      expect(await f.blobs.completeMultipart(key, uploadId, [{ partNumber: 1, etag: a.etag }])).toEqual({
        size: 10,
        sha256: sha256(bytes(10, 62)),
      });
    });

    it.skipIf(!options.listParts)('lists an open upload\'s parts ascending, the last sent under a number, and completes with what it lists', async () => {
      const key = `${prefix}/listed/file.bin`;
      const p1 = bytes(5 * MiB, 41);
      const p2 = bytes(777, 42);
      const uploadId = await f.blobs.createMultipart(key);
      expect(await f.blobs.listParts(key, uploadId)).toEqual([]);
      await f.blobs.uploadPart(key, uploadId, 2, new Uint8Array(bytes(500, 43)));
      const r2 = await f.blobs.uploadPart(key, uploadId, 2, new Uint8Array(p2)); // replaces the first part 2
      const r1 = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(p1));
      const listed = await f.blobs.listParts(key, uploadId);
      expect(listed).toEqual([
        { partNumber: 1, etag: r1.etag, size: p1.length },
        { partNumber: 2, etag: r2.etag, size: p2.length },
      ]);
      const whole = Buffer.concat([p1, p2]);
      expect(await f.blobs.completeMultipart(key, uploadId, listed, { sha256: sha256(whole), size: whole.length })).toEqual({ size: whole.length, sha256: sha256(whole) });
      await expect(f.blobs.listParts(key, uploadId)).rejects.toBeInstanceOf(UploadNotFoundError);
      await expect(f.blobs.listParts(key, 'no-such-upload')).rejects.toBeInstanceOf(UploadNotFoundError);
    });

    it('answers UploadNotFoundError for an upload id it never issued', async () => {
      const key = `${prefix}/unknown-upload`;
      for (const uploadId of ['no-such-upload', '', '../../etc']) {
        await expect(f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(bytes(10)))).rejects.toBeInstanceOf(UploadNotFoundError);
        await expect(f.blobs.completeMultipart(key, uploadId, [{ partNumber: 1, etag: 'x' }])).rejects.toBeInstanceOf(UploadNotFoundError);
        if (options.abortMultipart) await expect(f.blobs.abortMultipart(key, uploadId)).rejects.toBeInstanceOf(UploadNotFoundError);
      }
    });

    it.skipIf(!options.abortMultipart)('aborts a multipart upload: its id is unknown afterwards and nothing is kept', async () => {
      const key = `${prefix}/aborted`;
      const uploadId = await f.blobs.createMultipart(key);
      const a = await f.blobs.uploadPart(key, uploadId, 1, new Uint8Array(bytes(100)));
      await f.blobs.abortMultipart(key, uploadId);
      await expect(f.blobs.uploadPart(key, uploadId, 2, new Uint8Array(bytes(10)))).rejects.toBeInstanceOf(UploadNotFoundError);
      await expect(f.blobs.completeMultipart(key, uploadId, [{ partNumber: 1, etag: a.etag }])).rejects.toBeInstanceOf(
        UploadNotFoundError,
      );
      await expect(f.blobs.abortMultipart(key, uploadId)).rejects.toBeInstanceOf(UploadNotFoundError);
      expect(await f.blobs.head(key)).toBeUndefined();
    });
  });
}
