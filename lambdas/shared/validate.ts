/** Parses a request body with a zod schema, answering the spec's 400 codes instead of zod's errors. */
import * as z from 'zod';
import { PlatformError, type ErrorCode } from './errors.js';

export interface ValidateOptions {
  /** Code for a field the endpoint does not take (AI: unsupported_field; Data: unknown_field). */
  unknownField: ErrorCode;
  /** Code for anything else wrong (default invalid_body). */
  invalid?: ErrorCode;
}

export function parseBody<T extends z.ZodType>(schema: T, value: unknown, options: ValidateOptions): z.infer<T> {
  if (value === undefined) throw new PlatformError(options.invalid ?? 'invalid_body', 'A JSON body is required.');
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  // An unknown field is named before any other fault (zod lists it after the fields' own issues).
  const issue = result.error.issues.find((i) => i.code === 'unrecognized_keys') ?? result.error.issues[0];
  if (issue.code === 'unrecognized_keys') {
    const name = issue.keys[0];
    const path = [...issue.path, name].join('.');
    throw new PlatformError(options.unknownField, `Unknown field "${path}".`, path);
  }
  const path = issue.path.join('.') || null;
  throw new PlatformError(options.invalid ?? 'invalid_body', path ? `${path}: ${issue.message}` : issue.message, path);
}

/**
 * A value (a schema, or a group of them) built at its first use instead of at import. Building zod
 * schemas costs time, and a Lambda function's import is part of its cold start: a function then builds
 * only the schemas its own requests use (docs/decisions/lambda-bundles.md).
 */
export function onFirstUse<T>(build: () => T): () => T {
  let built: T | undefined;
  return () => (built ??= build());
}
