/**
 * Where the AI API's uploads live (docs/ai/uploads.md, "Storage"). Every key starts with the
 * organization taken from the credential, except the sweep's own partition, which names it inside.
 *
 *   aiupl#<org> / <upload id>                      an upload (its id is the start call's X-Operation-Id)
 *   aiupbytes#<org>#<workspace> / <sha256>         a stored file: the generation holding its bytes and
 *                                                  the latest expiry of the uploads naming it
 *   aiupsweep / <expires_at, 12 digits>#<what>     work for the sweep once that second has passed: an
 *                                                  upload's open parts, a file generation's bytes
 *   aifile#<org>#<workspace> / <created, 12 digits>#<upload id>
 *                                                  the upload's entry in OpenAI's Files listing {purpose},
 *                                                  written by its start (lambdas/ai/openai-compat/files.ts)
 * Bytes: `ai-uploads/<org>/<workspace>/<sha256>.<gen>` in the blob store (a generation per upload, so
 * two uploads never write one key; the stored file's item names the generation that is kept).
 */
export const uploadKey = (org: string, uploadId: string) => ({ pk: `aiupl#${org}`, sk: uploadId });
export const storedFileKey = (org: string, workspace: string, sha256: string) => ({ pk: `aiupbytes#${org}#${workspace}`, sk: sha256 });
export const uploadBytesKey = (org: string, workspace: string, sha256: string, gen: string) => `ai-uploads/${org}/${workspace}/${sha256}.${gen}`;

export const fileListingPartition = (org: string, workspace: string) => `aifile#${org}#${workspace}`;
export const fileListingKey = (org: string, workspace: string, createdSeconds: number, uploadId: string) => ({ pk: fileListingPartition(org, workspace), sk: `${String(createdSeconds).padStart(12, '0')}#${uploadId}` });

export const SWEEP_PARTITION = 'aiupsweep';
const second = (epochSeconds: number) => String(epochSeconds).padStart(12, '0');
/** Sorts by the second it becomes due; the rest only makes it unique. */
export const sweepKey = (epochSeconds: number, what: string) => ({ pk: SWEEP_PARTITION, sk: `${second(epochSeconds)}#${what}` });
/** Every entry due before `epochSeconds`. */
export const dueBefore = (epochSeconds: number) => ({ lt: second(epochSeconds) });
