/**
 * Where ffprobe and ffmpeg read a job's recording: in place on the local disk (the embedded blob
 * store's `filePath`), else through a URL the store signs (S3 on AWS: ffprobe reads only the ranges it
 * needs, never the whole file into the function), else from a copy in a temporary file.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Engine } from '../../engine/ports.js';
import { PlatformError } from '../../shared/errors.js';
import { probeMedia } from './media.js';
import type { Probed } from './records.js';

/** A signed URL lives this long: a step's runs (cutting a 6-hour recording, frames) end well within it. */
const URL_SECONDS = 3600;

/**
 * The start's probe runs inside its route's function, which Lambda stops at 29 s (API Gateway's limit,
 * lib/route-function.ts): past this, a recording is refused `400 invalid_body` as one ffprobe cannot
 * read, before Lambda would cut the call off with a 5xx. A real recording's probe reads a few hundred
 * kB in well under a second.
 */
export const START_PROBE_TIMEOUT_MS = 20_000;

/** The input for ffmpeg, and what to remove when done (a temporary copy). */
export interface MediaInput {
  input: string;
  release(): Promise<void>;
}

/** undefined when the bytes are gone (the source expired). */
export async function openMedia(engine: Engine, key: string): Promise<MediaInput | undefined> {
  const path = await engine.blobs.filePath?.(key);
  if (path) return { input: path, release: async () => undefined };
  if (!(await engine.blobs.head(key))) return undefined;
  if (engine.blobs.downloadUrl) return { input: await engine.blobs.downloadUrl(key, URL_SECONDS), release: async () => undefined };
  const found = await engine.blobs.get(key);
  if (!found) return undefined;
  const dir = await mkdtemp(join(tmpdir(), 'job-media-'));
  const input = join(dir, 'recording');
  await pipeline(found.body, createWriteStream(input));
  return { input, release: () => rm(dir, { recursive: true, force: true }) };
}

/** The start's view of a recording (an upload just checked complete). */
export async function mediaInput(engine: Engine, key: string): Promise<MediaInput> {
  const media = await openMedia(engine, key);
  if (!media) throw new PlatformError('upload_not_found', 'The recording\'s upload expired meanwhile.', 'upload_id');
  return media;
}

/** Probes the recording for the start: `400 invalid_body` naming `upload_id` when ffprobe cannot read it. */
export async function probeRecording(media: MediaInput): Promise<Probed> {
  try {
    const probed = await probeMedia(media.input, { timeoutMs: START_PROBE_TIMEOUT_MS }).catch((error: unknown) => {
      // The store did not serve the bytes (a failed or refused read): the recording is fine, try again.
      throw new PlatformError('service_unavailable', 'The recording could not be read from storage just now; try again with the same X-Operation-Id.', { retryAfterSeconds: 5, cause: error });
    });
    if ('missing' in probed) {
      throw new PlatformError('service_unavailable', 'ffprobe is not installed where this call runs (the FFMPEG_PATH setting names ffmpeg; ffprobe is looked for beside it).', { retryAfterSeconds: 60 });
    }
    if ('unreadable' in probed) throw new PlatformError('invalid_body', `upload_id names a file that is not a recording ffprobe can read (${probed.unreadable}).`, 'upload_id');
    return { duration_s: probed.duration_s, audio: probed.audio, video: probed.video };
  } finally {
    await media.release();
  }
}
