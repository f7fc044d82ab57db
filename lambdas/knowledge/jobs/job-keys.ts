/**
 * Where knowledge jobs live (docs/ai/knowledge-jobs.md, "Storage"). Every key starts with the
 * organization taken from the credential, except the sweep's own partition, which names it inside.
 *
 *   kjob#<org>#<app> / <job id>        a job: its request, status, step, counts, spend; `<app>` the
 *                                      calling credential's application (`-` for an organization-wide
 *                                      one), which alone sees it; job ids sort by time, so the
 *                                      partition read backwards is newest first
 *   kjobspend#<org> / <job id>         what the job spent and holds against its max_price_usd
 *                                      (counted holds, shared/leases.ts)
 *   kjobsweep / <due>#<org>#<app>#<job>#<r>  a running job's lease: due when a processor that died would
 *                                      have renewed it; the jobs sweep sends its step again
 * Bytes, under `knowledge-jobs/<org>/<job>/`: the given transcript and notes, each step's stored
 * result (`<name>.json`), the audio pieces and the frames, removed when the job is finished.
 */
import { randomBytes } from 'node:crypto';

export const jobsPk = (org: string, app: string) => `kjob#${org}#${app}`;
export const jobKey = (org: string, app: string, job: string) => ({ pk: jobsPk(org, app), sk: job });
/** The partition's application part of a credential's application id (null: organization-wide). */
export const appPart = (applicationId: string | null) => applicationId ?? '-';
export const jobSpendKey = (org: string, job: string) => ({ pk: `kjobspend#${org}`, sk: job });

export const JOB_SWEEP_PARTITION = 'kjobsweep';
const second = (epochSeconds: number) => String(epochSeconds).padStart(12, '0');
export const jobLeaseKey = (dueAt: number, org: string, app: string, job: string) => ({ pk: JOB_SWEEP_PARTITION, sk: `${second(dueAt)}#${org}#${app}#${job}#${randomBytes(4).toString('hex')}` });
export const leasesDueBefore = (epochSeconds: number) => ({ lt: second(epochSeconds) });

export const JOB_BLOB_PREFIX = 'knowledge-jobs/';
export const jobBlobKey = (org: string, job: string, name: string) => `${JOB_BLOB_PREFIX}${org}/${job}/${name}`;
export const jobBlobPrefix = (org: string, job: string) => `${JOB_BLOB_PREFIX}${org}/${job}/`;
