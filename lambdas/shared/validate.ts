/**
 * Parses request bodies and queries with zod schemas, answering the spec's 400 codes instead of zod's
 * errors (docs/decisions/parsing.md). Each domain module owns its `parseX` functions and exports its
 * schemas by name; these are the one place a zod issue becomes a code, a param and a message.
 */
import * as z from 'zod/mini';
import en from 'zod/v4/locales/en.js';
import { PlatformError, type ErrorCode } from './errors.js';

// zod/mini carries no messages of its own: its issues say "Invalid input" unless told the English ones
// (imported alone: `z.locales` would put every language in each bundle).
z.config(en());

export interface ValidateOptions {
  /** Code for a field the endpoint does not take (AI: unsupported_field; Data and Events: unknown_field). */
  unknownField: ErrorCode;
  /** Code for anything else wrong (default invalid_body). */
  invalid?: ErrorCode;
  /** Codes for faults in named top-level fields, where the spec names one (Events `max`: invalid_limit); the param is then that field. */
  fieldCodes?: Readonly<Record<string, ErrorCode>>;
}

export interface QueryOptions {
  /** Code for a parameter the endpoint does not take (default invalid_query). */
  unknownParameter?: ErrorCode;
  /** Code for anything else wrong (default invalid_query). */
  invalid?: ErrorCode;
  /** Codes for faults in named parameters, where the spec names one (the stream's `lease_seconds`: invalid_limit). */
  fieldCodes?: Readonly<Record<string, ErrorCode>>;
  /** Said after an unknown parameter's name, e.g. "the stream takes only lease_seconds". */
  takes?: string;
}

/** What is wrong with a value: the spec's code, the field or parameter it names (dotted), and a message. */
export interface Fault<C extends string = ErrorCode> {
  code: C;
  param: string | null;
  message: string;
}

/**
 * A zod issue may carry its own code (`refine(check, { params: { code: 'invalid_id' } })`), for a
 * fault the spec names more narrowly than the field does.
 */
const issueCode = <C extends string>(issue: z.core.$ZodIssue): C | undefined =>
  issue.code === 'custom' ? (issue.params?.code as C | undefined) : undefined;

/**
 * The one fault a failed parse answers (codes: the spec's error codes, or another list of its, such as
 * a publish's rejection codes). An unknown field is named before any other fault (zod lists it
 * after the fields' own issues): a client that misspelt a field hears that, not that the field it meant
 * is missing. Inside a field with a code of its own (`delivery`: invalid_delivery) an unknown key is that
 * field's fault, named before the field's other faults, and the field is the param.
 */
export function faultOf<C extends string = ErrorCode>(error: z.core.$ZodError, unknownField: C, invalid: C, fieldCodes?: Readonly<Record<string, C>>, unknownWord = 'field'): Fault<C> {
  const codeOfField = (issue: z.core.$ZodIssue) => (typeof issue.path[0] === 'string' ? fieldCodes?.[issue.path[0]] : undefined);
  const issues = error.issues;
  let issue = issues.find((i) => i.code === 'unrecognized_keys' && codeOfField(i) === undefined) ?? issues[0];
  const fieldCode = codeOfField(issue);
  if (fieldCode !== undefined) issue = issues.find((i) => i.code === 'unrecognized_keys' && i.path[0] === issue.path[0]) ?? issue;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0];
    if (fieldCode !== undefined) return { code: fieldCode, param: String(issue.path[0]), message: `Unknown ${String(issue.path[0])} field "${key}".` };
    const param = [...issue.path, key].join('.');
    return { code: unknownField, param, message: `Unknown ${unknownWord} "${param}".` };
  }
  const path = issue.path.join('.') || null;
  // A schema's own message that names its field is a sentence already; zod's are prefixed with the field.
  const message = path && !issue.message.includes(path) ? `${path}: ${issue.message}` : issue.message;
  const own = issueCode<C>(issue);
  // A field with a code of its own is named as a whole: the code says what is wrong in it.
  if (own === undefined && fieldCode !== undefined) return { code: fieldCode, param: String(issue.path[0]), message };
  return { code: own ?? invalid, param: path, message };
}

const thrown = (fault: Fault) => new PlatformError(fault.code, fault.message, fault.param);

export function parseBody<T extends z.core.$ZodType>(schema: T, value: unknown, options: ValidateOptions): z.output<T> {
  if (value === undefined) throw new PlatformError(options.invalid ?? 'invalid_body', 'A JSON body is required.');
  const result = z.safeParse(schema, value);
  if (result.success) return result.data;
  throw thrown(faultOf(result.error, options.unknownField, options.invalid ?? 'invalid_body', options.fieldCodes));
}

/**
 * Parses a request's query (every value a string: a schema coerces explicitly, e.g. with
 * `queryInteger`). An unknown parameter is named before any other fault, as in a body.
 */
export function parseQuery<T extends z.core.$ZodType>(schema: T, query: Record<string, string>, options: QueryOptions = {}): z.output<T> {
  const result = z.safeParse(schema, query);
  if (result.success) return result.data;
  const fault = faultOf(result.error, options.unknownParameter ?? 'invalid_query', options.invalid ?? 'invalid_query', options.fieldCodes, 'query parameter');
  if (options.takes && result.error.issues.some((i) => i.code === 'unrecognized_keys')) {
    fault.message = `${fault.message.slice(0, -1)}; ${options.takes}.`;
  }
  throw thrown(fault);
}

/**
 * A whole-number query parameter from `min` to `max` (at most 15 digits, so no float rounding), as a
 * number; `fallback` when it is absent. Query values are strings: the coercion is explicit here.
 */
const wholeNumber = (range: { min: number; max: number }) => {
  const message = `a whole number from ${range.min} to ${range.max}`;
  const schema = z.pipe(z.pipe(z.string().check(z.regex(/^\d{1,15}$/, message)), z.transform(Number)), z.number().check(z.minimum(range.min, message), z.maximum(range.max, message)));
  // The API documents show it as what it means, an integer parameter (query values travel as text either way).
  return schema.register(z.globalRegistry, { type: 'integer', minimum: range.min, maximum: range.max } as z.core.GlobalMeta);
};
export function queryInteger(range: { min: number; max: number }): z.ZodMiniOptional<ReturnType<typeof wholeNumber>>;
export function queryInteger(range: { min: number; max: number }, fallback: number): z.ZodMiniDefault<ReturnType<typeof wholeNumber>>;
export function queryInteger(range: { min: number; max: number }, fallback?: number) {
  return fallback === undefined ? z.optional(wholeNumber(range)) : z._default(wholeNumber(range), fallback);
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

/** A JSON object (not an array, not null): what a hand-written body parser checks before reading fields. */
export const isJsonObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
