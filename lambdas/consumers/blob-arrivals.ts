/**
 * Files sent straight to the bucket (a redirected PUT: docs/data/blobs.md, "Large files on AWS"): the
 * bucket's ObjectCreated notification for `arrivals/` keys (where upload URLs write) invokes this
 * function, which settles the arrival the key names (adopts and checks the bytes, then records the
 * file, or deletes them unseen). An object there with no arrival (sent again after its arrival was
 * settled) is left to the bucket's lifecycle rule. Reads and record writes settle too, so
 * a late or lost notification only delays what nobody has asked for yet.
 */
import type { Context, S3Event } from 'aws-lambda';
import { getEngine } from '../engine/index.js';
import { settleArrivals, SHA256_PATTERN } from '../data/blobs.js';
import { flushActivity } from '../activity/activity.js';
import { bindHooks } from '../http/hook-bindings.js';
import { inRequest, log } from '../shared/log.js';

// A recorded file writes its activity entry and platform event as the PUT route would.
bindHooks();

/** `arrivals/<org>/<database, URI-encoded>/<sha256>.<gen>`, as arrivalBytesKey() writes it. */
const ARRIVAL_KEY = /^arrivals\/([^/]+)\/([^/]+)\/([0-9a-f]{64})\.([0-9a-f]+)$/;

/** An object key as S3 notifications give it: URL-encoded, spaces as `+`. */
export function arrivalOfKey(encodedKey: string): { org: string; database: string; sha256: string; gen: string } | undefined {
  let key: string;
  try {
    key = decodeURIComponent(encodedKey.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
  const m = ARRIVAL_KEY.exec(key);
  if (!m || !SHA256_PATTERN.test(m[3])) return undefined;
  let database: string;
  try {
    database = decodeURIComponent(m[2]);
  } catch {
    return undefined;
  }
  return { org: m[1], database, sha256: m[3], gen: m[4] };
}

/**
 * A failure throws: Lambda retries the asynchronous invocation, and reads settle meanwhile anyway.
 * Lines name the invocation (`request_id`).
 */
export function handler(event: S3Event, context?: Context): Promise<{ settled: number }> {
  return inRequest({ request_id: context?.awsRequestId }, () => settle(event));
}

async function settle(event: S3Event): Promise<{ settled: number }> {
  const engine = await getEngine();
  let settled = 0;
  for (const record of event.Records ?? []) {
    const arrival = arrivalOfKey(record.s3?.object?.key ?? '');
    if (!arrival) continue;
    if (await settleArrivals(engine, arrival.org, arrival.database, arrival.sha256, arrival.gen)) settled++;
  }
  await flushActivity(engine);
  if (settled) log.info('blob arrivals settled', { settled });
  return { settled };
}
