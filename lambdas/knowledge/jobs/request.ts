/**
 * The body of `POST /v1/knowledge/jobs` (spec 4.8; docs/ai/knowledge-jobs.md, "Request"): every field
 * of the spec's table checked here, unknown fields `400 unsupported_field`, a bad value `400
 * invalid_body` naming the field (dotted inside `references`).
 */
import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import { PlatformError } from '../../shared/errors.js';
import { onFirstUse, parseBody } from '../../shared/validate.js';
import { wellFormed } from '../../vector/passages.js';

/** Spec 8: a referenced transcript or notes upload, and (ours) an inline one, at most 16 MiB of UTF-8. */
export const MAX_TEXT_BYTES = 16 * 1024 * 1024;
export const POWERS = ['light', 'medium', 'max'] as const;
export type Power = (typeof POWERS)[number];
export const DEFAULT_MAX_POINTERS = 10;
export const MAX_POINTERS = 50;
export const DEFAULT_KEEP_SOURCE_HOURS = 24;
export const MAX_KEEP_SOURCE_HOURS = 168;
/** Spec 4.8's default output language. */
export const DEFAULT_OUTPUT_LANGUAGE = 'en';
/** Whole USD and up to six decimals (a micro-USD, what budgets count in); at most 999,999.999999. */
export const PRICE_PATTERN = /^\d{1,6}(\.\d{1,6})?$/;
/**
 * A BCP 47 language tag as RFC 5646 shapes it, loosely: a 2-3 letter language (or 4-8 for registered
 * ones), then subtags of 1-8 letters or digits (script, region, variant). Not checked against the
 * registry: the tag is a hint to the models, and a new one must not be refused for being new.
 */
const LANGUAGE_TAG = /^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8}){0,7}$/;

const language = (what: string) =>
  z.string().check(z.maxLength(64), z.regex(LANGUAGE_TAG, `${what} must be a BCP 47 language tag such as en, de-CH or zh-Hant`));

const uploadId = (what: string) => z.string().check(z.minLength(1), z.maxLength(128), z.describe(what));

const text = (what: string) =>
  z.string().check(
    z.refine((s) => Buffer.byteLength(s, 'utf8') <= MAX_TEXT_BYTES, `${what} must be at most 16 MiB as UTF-8; send a larger one as an upload in references`),
    z.refine(wellFormed, `${what} must be well-formed Unicode (no lone surrogates)`),
  );

const switchSchema = (what: string) => z.strictObject({ enabled: z.boolean().check(z.describe(what)) });

export const startJobSchema = onFirstUse(() =>
  z.strictObject({
    upload_id: uploadId('Required. A completed upload of the recording (its X-Operation-Id at POST /v1/uploads).'),
    max_price_usd: z.string().check(
      z.regex(PRICE_PATTERN, 'max_price_usd must be a decimal string such as "2.50": up to 6 digits, then up to 6 decimals'),
      z.refine((s) => Number(s) > 0, 'max_price_usd must be greater than zero'),
      z.describe('Required. The most the job may cost, in USD, as a decimal string greater than zero ("2.50"). Over the organization\'s cap, or below the estimate: 403 budget_exceeded before any paid work.'),
    ),
    spoken_language: z.optional(language('spoken_language').check(z.describe('A BCP 47 tag: the transcription\'s hint.'))),
    output_language: z.optional(language('output_language').check(z.describe('A BCP 47 tag (default `en`): the language of statements and the summary; quotes and the transcript are never translated.'))),
    power: z.optional(z.enum(POWERS).check(z.describe('`light`, `medium` (default) or `max`: `light` checks no evidence by model and takes no frames; `max` adds a second extraction pass and frame captions.'))),
    max_pointers: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_POINTERS), z.describe('Still frames at most, 1 to 50 (default 10).'))),
    keep_source_hours: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_KEEP_SOURCE_HOURS), z.describe('Hours the recording is kept after the job starts, 1 to 168 (default 24), within the organization\'s cap.'))),
    references: z.optional(
      z.strictObject({
        transcript: z.optional(uploadId('A completed upload of at most 16 MiB: the transcript (plain text, WebVTT, SRT, or `[HH:MM:SS]` lines).')),
        notes: z.optional(uploadId('A completed upload of at most 16 MiB: notes (plain text or Markdown), context for the model, never evidence.')),
      }),
    ),
    transcript: z.optional(text('transcript').check(z.describe('The transcript inline (at most 16 MiB; plain text, WebVTT, SRT, or `[HH:MM:SS]` lines): no transcription is paid for.'))),
    notes: z.optional(text('notes').check(z.describe('Notes inline (plain text or Markdown, at most 16 MiB): context for the model, never evidence.'))),
    adaptive_evidence_reconciliation: z.optional(switchSchema('`false`: no entry is checked against its evidence by a model (the check in code always runs). Default: on unless `power` is `light`.')),
    adaptive_evidence_extraction: z.optional(switchSchema('`false`: no still frames. Default: on unless `power` is `light`.')),
  }),
);

export type StartJobBody = z.output<ReturnType<typeof startJobSchema>>;

/** The request as the job keeps it: defaults applied, the price in micro-USD. */
export interface JobRequest {
  upload_id: string;
  max_price_micro: number;
  max_price_usd: string;
  spoken_language: string | null;
  output_language: string;
  power: Power;
  max_pointers: number;
  keep_source_hours: number;
  reconcile: boolean;
  frames: boolean;
  references: { transcript: string | null; notes: string | null };
  /** The inline texts; stored as blobs by the start, never in the job record. */
  transcript: string | null;
  notes: string | null;
  /** SHA-256 of the body as sent: the same operation id with another body is 409 operation_id_reused. */
  body_sha256: string;
}

/** `"2.5"` → 2,500,000 micro-USD, exactly (no float on the way). */
export function microOfPrice(price: string): number {
  const [whole, fraction = ''] = price.split('.');
  return Number(whole) * 1e6 + Number(fraction.padEnd(6, '0'));
}

export function parseStartJob(body: unknown): JobRequest {
  const b = parseBody(startJobSchema(), body, { unknownField: 'unsupported_field' });
  if (b.transcript !== undefined && b.references?.transcript !== undefined) {
    throw new PlatformError('invalid_body', 'Send the transcript inline or as references.transcript, not both.', 'transcript');
  }
  if (b.notes !== undefined && b.references?.notes !== undefined) {
    throw new PlatformError('invalid_body', 'Send the notes inline or as references.notes, not both.', 'notes');
  }
  const power = b.power ?? 'medium';
  return {
    upload_id: b.upload_id,
    max_price_micro: microOfPrice(b.max_price_usd),
    max_price_usd: b.max_price_usd,
    spoken_language: b.spoken_language ?? null,
    output_language: b.output_language ?? DEFAULT_OUTPUT_LANGUAGE,
    power,
    max_pointers: b.max_pointers ?? DEFAULT_MAX_POINTERS,
    keep_source_hours: b.keep_source_hours ?? DEFAULT_KEEP_SOURCE_HOURS,
    reconcile: b.adaptive_evidence_reconciliation?.enabled ?? power !== 'light',
    frames: b.adaptive_evidence_extraction?.enabled ?? power !== 'light',
    references: { transcript: b.references?.transcript ?? null, notes: b.references?.notes ?? null },
    transcript: b.transcript ?? null,
    notes: b.notes ?? null,
    body_sha256: createHash('sha256').update(JSON.stringify(body)).digest('hex'),
  };
}
