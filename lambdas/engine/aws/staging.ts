/**
 * Where the S3 blob store keeps objects that belong to no key yet (a blob being hashed, a multipart
 * upload, a joined upload waiting for its check): the stack expires what is left there (lib/storage.ts).
 */
export const STAGING_PREFIX = '.staging/';
