/** s3rver ships no typings; this covers what the tests use. */
declare module 's3rver' {
  import type { Server } from 'node:http';
  import type { AddressInfo } from 'node:net';

  interface S3rverOptions {
    address?: string;
    /** 0 picks a free port. */
    port?: number;
    silent?: boolean;
    /** Where buckets and objects are stored on disk. */
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    vhostBuckets?: boolean;
    serviceEndpoint?: string;
    configureBuckets?: { name: string; configs?: (string | Buffer)[] }[];
  }

  class S3rver {
    constructor(options?: S3rverOptions);
    httpServer?: Server;
    /** Starts listening; resolves with the bound address. */
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
    reset(): void;
  }
  export default S3rver;
}
