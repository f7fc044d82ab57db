/**
 * The one place AWS SDK v3 errors are read. Every AWS adapter (DynamoDB, S3, SQS, KMS, the API
 * Gateway Management API) runs its SDK calls through `callAws`, which turns what the engine has a
 * type for into that type (errors.ts) and passes anything else through unchanged: an error the
 * engine has no name for is a bug or a configuration error (access denied, a missing queue or key),
 * not something to dress up.
 *
 * The outcomes an adapter answers itself rather than throws (a missing S3 key, a gone WebSocket
 * connection, an SQS message no longer in flight, a DynamoDB start key outside the query) have
 * predicates here too, so no adapter matches an SDK error name of its own.
 */
import {
  ConditionFailedError,
  EngineError,
  EngineLimitError,
  EngineUnavailableError,
  InvalidPartError,
  TransactionCanceledError,
  UploadNotFoundError,
} from '../errors.js';

/** What SDK v3 errors carry, all optional: service exceptions, SDK-side errors and Node network errors alike. */
interface AwsErrorShape {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  $fault?: unknown;
  $retryable?: unknown;
  $metadata?: { httpStatusCode?: unknown };
  CancellationReasons?: { Code?: string; Message?: string }[];
}

/** Throttling, quota and transient server-side errors, by name, across DynamoDB, S3, SQS, KMS and API Gateway. */
const UNAVAILABLE_NAMES = new Set([
  // throttling, any service
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'LimitExceededException', // KMS request quota, API Gateway 429
  // DynamoDB
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'TransactionConflictException',
  'TransactionInProgressException',
  // S3
  'SlowDown',
  // SQS
  'KmsThrottled',
  'OverLimit',
  // KMS
  'KMSInternalException',
  'DependencyTimeoutException',
  // server side, any service
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'InternalError',
  'InternalFailure',
  'InternalServerError',
  'InternalServerErrorException',
  // timeouts
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
]);

/** Node network error codes: the service could not be reached, or the connection broke. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

/** DynamoDB cancellation reasons that mean "try again later", not "your request was wrong". */
const UNAVAILABLE_REASONS = new Set(['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded']);
const ITEM_SIZE = /item size.*exceeded/i;
/** `The query can return at most one row and cannot be restarted`: a start key of another partition, for a query with a sort key condition. */
const INVALID_START_KEY = /start(ing)? key|cannot be restarted/i;

export type AwsErrorClass =
  /** Throttled, a 429 / 5xx / server fault, retryable, a timeout or a network failure: answer 503. */
  | { kind: 'unavailable' }
  /** DynamoDB ConditionalCheckFailedException. */
  | { kind: 'condition_failed' }
  /** DynamoDB TransactionCanceledException with a failed condition at `failed` (indexes of the writes). */
  | { kind: 'transaction_canceled'; failed: number[] }
  /** DynamoDB item too large (ValidationException or a cancellation reason); S3 EntityTooSmall. */
  | { kind: 'limit'; limit: 'item_size' | 'multipart_part'; message: string }
  /** S3 NoSuchUpload. */
  | { kind: 'upload_not_found' }
  /** S3 InvalidPart / InvalidPartOrder. */
  | { kind: 'invalid_part' }
  /** S3 NoSuchKey / NotFound / another 404 (not a missing bucket). */
  | { kind: 'not_found' }
  /** API Gateway Management API GoneException: the WebSocket connection is gone. */
  | { kind: 'gone' }
  /** SQS MessageNotInflight. */
  | { kind: 'not_in_flight' }
  /** DynamoDB ValidationException about the ExclusiveStartKey of a query. */
  | { kind: 'invalid_start_key' }
  /** Anything else, the engine's own errors included: passed through unchanged. */
  | { kind: 'other' };

const OTHER: AwsErrorClass = { kind: 'other' };

/** The shared notion of "unavailable", for every service: a 429 or 5xx, a server fault, an error the SDK marks retryable, a throttling or transient name, a network failure. */
function signalsUnavailable(e: AwsErrorShape): boolean {
  const status = e.$metadata?.httpStatusCode;
  if (typeof status === 'number' && (status === 429 || status >= 500)) return true;
  if (e.$fault === 'server') return true;
  if (e.$retryable) return true; // `{}` or `{ throttling: true }` on errors the service models as retryable
  if (typeof e.name === 'string' && UNAVAILABLE_NAMES.has(e.name)) return true;
  return typeof e.code === 'string' && NETWORK_CODES.has(e.code);
}

/** Sorts an SDK error into what the engine makes of it. Service-specific names win over the generic checks. */
export function classifyAwsError(error: unknown): AwsErrorClass {
  if (typeof error !== 'object' || error === null || error instanceof EngineError) return OTHER;
  const e = error as AwsErrorShape;
  const name = typeof e.name === 'string' ? e.name : '';
  const message = typeof e.message === 'string' ? e.message : '';

  switch (name) {
    case 'ConditionalCheckFailedException':
      return { kind: 'condition_failed' };
    case 'TransactionCanceledException': {
      const reasons = Array.isArray(e.CancellationReasons) ? e.CancellationReasons : [];
      const failed = reasons.flatMap((r, i) => (r?.Code === 'ConditionalCheckFailed' ? [i] : []));
      if (failed.length) return { kind: 'transaction_canceled', failed };
      if (reasons.some((r) => UNAVAILABLE_REASONS.has(r?.Code ?? ''))) return { kind: 'unavailable' };
      const tooBig = reasons.find((r) => ITEM_SIZE.test(r?.Message ?? ''));
      if (tooBig) return { kind: 'limit', limit: 'item_size', message: tooBig.Message ?? message };
      break; // no reason we know: the generic checks below decide
    }
    case 'ValidationException':
      if (ITEM_SIZE.test(message)) return { kind: 'limit', limit: 'item_size', message };
      if (INVALID_START_KEY.test(message)) return { kind: 'invalid_start_key' };
      break;
    case 'NoSuchUpload':
      return { kind: 'upload_not_found' };
    case 'EntityTooSmall':
      return { kind: 'limit', limit: 'multipart_part', message };
    case 'InvalidPart':
    case 'InvalidPartOrder':
      return { kind: 'invalid_part' };
    case 'GoneException':
      return { kind: 'gone' };
    case 'MessageNotInflight':
      return { kind: 'not_in_flight' };
    case 'NoSuchKey':
    case 'NotFound':
      return { kind: 'not_found' };
  }

  if (signalsUnavailable(e)) return { kind: 'unavailable' };
  if (e.$metadata?.httpStatusCode === 404 && name !== 'NoSuchBucket') return { kind: 'not_found' };
  return OTHER;
}

/**
 * The engine error for an SDK error, with the SDK error as its `cause`; the error itself when the
 * engine has no type for it (outcomes such as `not_found` or `gone` are for the adapter to answer).
 * `what` names the call in the message of an EngineUnavailableError ("SQS SendMessage").
 */
export function translateAwsError(error: unknown, what = 'AWS'): unknown {
  const c = classifyAwsError(error);
  if (c.kind === 'other') return error;
  const e = error as AwsErrorShape;
  const name = typeof e.name === 'string' ? e.name : 'error';
  const message = typeof e.message === 'string' ? e.message : '';
  const withCause = <E extends Error>(translated: E): E => Object.assign(translated, { cause: error });
  switch (c.kind) {
    case 'unavailable':
      return new EngineUnavailableError(`${what}: ${name}: ${message}`, { cause: error });
    case 'condition_failed':
      return withCause(new ConditionFailedError());
    case 'transaction_canceled':
      return withCause(new TransactionCanceledError(c.failed));
    case 'limit':
      return withCause(new EngineLimitError(c.limit, c.message));
    case 'upload_not_found':
      return withCause(new UploadNotFoundError(message || 'no such multipart upload'));
    case 'invalid_part':
      return withCause(new InvalidPartError(message || 'a listed part is invalid or out of order'));
    default:
      return error;
  }
}

/** Runs an SDK call, throwing its error translated (see translateAwsError). */
export async function callAws<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw translateAwsError(error, what);
  }
}

/** Throttled, overloaded, timed out or unreachable: callers answer 503. */
export const isUnavailable = (error: unknown): boolean => classifyAwsError(error).kind === 'unavailable';
/** A missing S3 key (NoSuchKey, NotFound, another 404 but a missing bucket or upload). */
export const isNotFound = (error: unknown): boolean => classifyAwsError(error).kind === 'not_found';
/** The WebSocket connection is gone (GoneException). */
export const isGone = (error: unknown): boolean => classifyAwsError(error).kind === 'gone';
/** The SQS message is no longer in flight (MessageNotInflight). */
export const isNotInFlight = (error: unknown): boolean => classifyAwsError(error).kind === 'not_in_flight';
/** DynamoDB refused the ExclusiveStartKey of a query (a cursor of the right shape naming another partition or range). */
export const isInvalidStartKey = (error: unknown): boolean => classifyAwsError(error).kind === 'invalid_start_key';
