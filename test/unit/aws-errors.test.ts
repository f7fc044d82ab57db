/**
 * The AWS error classifier (lambdas/engine/aws/errors.ts), with plain objects shaped like SDK v3
 * errors: `name`, `message`, `$fault`, `$retryable`, `$metadata.httpStatusCode`, Node's `code`, and
 * DynamoDB's `CancellationReasons`.
 */
import { describe, expect, it } from 'vitest';
import {
  callAws,
  classifyAwsError,
  isGone,
  isInvalidStartKey,
  isNotFound,
  isNotInFlight,
  isUnavailable,
  translateAwsError,
} from '../../lambdas/engine/aws/errors.js';
import {
  BlobMismatchError,
  ConditionFailedError,
  EngineError,
  EngineLimitError,
  EngineUnavailableError,
  InvalidPartError,
  TransactionCanceledError,
  UploadNotFoundError,
} from '../../lambdas/engine/errors.js';

/** An SDK v3 service exception as the client throws it (an Error with the SDK's fields). */
const sdk = (name: string, status: number, extra: Record<string, unknown> = {}) =>
  Object.assign(new Error(`${name} message`), {
    name,
    $fault: status >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode: status, requestId: 'req-1', attempts: 1 },
    ...extra,
  });
/** A Node network error (what the HTTP handler rejects with before any response). */
const network = (code: string) => Object.assign(new Error(`connect ${code}`), { code });

describe('unavailable: one notion for every service', () => {
  const unavailable: [string, unknown][] = [
    // throttling names, status 400 as the services send them
    ['DynamoDB ProvisionedThroughputExceededException', sdk('ProvisionedThroughputExceededException', 400)],
    ['DynamoDB ThrottlingException', sdk('ThrottlingException', 400)],
    ['DynamoDB RequestLimitExceeded', sdk('RequestLimitExceeded', 400)],
    ['DynamoDB TransactionConflictException', sdk('TransactionConflictException', 400)],
    ['DynamoDB TransactionInProgressException', sdk('TransactionInProgressException', 400)],
    ['S3 SlowDown', sdk('SlowDown', 400)],
    ['S3 RequestTimeout', sdk('RequestTimeout', 400)],
    ['SQS RequestThrottled', sdk('RequestThrottled', 400)],
    ['SQS KmsThrottled', sdk('KmsThrottled', 400)],
    ['SQS OverLimit', sdk('OverLimit', 403)],
    ['KMS ThrottlingException', sdk('ThrottlingException', 400)],
    ['KMS LimitExceededException', sdk('LimitExceededException', 400)],
    ['TooManyRequestsException', sdk('TooManyRequestsException', 400)],
    ['the SDK TimeoutError', Object.assign(new Error('timed out'), { name: 'TimeoutError' })],
    // status and fault, whatever the name
    ['an unnamed 500', sdk('Unknown', 500)],
    ['an unnamed 503', sdk('Unknown', 503)],
    ['a 429', sdk('Unknown', 429, { $fault: 'client' })],
    ['$fault server without a status', { name: 'Whatever', $fault: 'server', $metadata: {} }],
    ['$retryable {} (modelled retryable)', sdk('ReplicatedWriteConflictException', 400, { $retryable: {} })],
    ['$retryable throttling', sdk('Unknown', 400, { $retryable: { throttling: true } })],
    // network
    ...['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN'].map(
      (code): [string, unknown] => [`network ${code}`, network(code)],
    ),
  ];
  it.each(unavailable)('%s -> EngineUnavailableError with the SDK error as cause', (_label, error) => {
    expect(classifyAwsError(error)).toEqual({ kind: 'unavailable' });
    expect(isUnavailable(error)).toBe(true);
    const out = translateAwsError(error, 'Svc Op');
    expect(out).toBeInstanceOf(EngineUnavailableError);
    expect((out as Error).cause).toBe(error);
    expect((out as Error).message).toMatch(/^Svc Op: /);
  });

  it('is not fooled by a 4xx client error', () => {
    for (const error of [sdk('AccessDenied', 403), sdk('ValidationException', 400), sdk('QueueDoesNotExist', 400), network('EACCES')]) {
      expect(isUnavailable(error)).toBe(false);
    }
  });
});

describe('DynamoDB mappings', () => {
  it('ConditionalCheckFailedException -> ConditionFailedError', () => {
    const error = sdk('ConditionalCheckFailedException', 400);
    expect(classifyAwsError(error)).toEqual({ kind: 'condition_failed' });
    const out = translateAwsError(error);
    expect(out).toBeInstanceOf(ConditionFailedError);
    expect((out as Error).cause).toBe(error);
  });

  const canceled = (...reasons: { Code: string; Message?: string }[]) =>
    sdk('TransactionCanceledException', 400, { CancellationReasons: reasons });

  it('TransactionCanceledException with failed conditions -> TransactionCanceledError with their indexes', () => {
    const error = canceled({ Code: 'None' }, { Code: 'ConditionalCheckFailed' }, { Code: 'None' }, { Code: 'ConditionalCheckFailed' });
    expect(classifyAwsError(error)).toEqual({ kind: 'transaction_canceled', failed: [1, 3] });
    const out = translateAwsError(error);
    expect(out).toBeInstanceOf(TransactionCanceledError);
    expect((out as TransactionCanceledError).failed).toEqual([1, 3]);
  });

  it('a failed condition wins over a conflict in the same cancellation', () => {
    expect(classifyAwsError(canceled({ Code: 'TransactionConflict' }, { Code: 'ConditionalCheckFailed' }))).toEqual({
      kind: 'transaction_canceled',
      failed: [1],
    });
  });

  it.each(['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded'])(
    'TransactionCanceledException for %s -> EngineUnavailableError',
    (code) => {
      const error = canceled({ Code: 'None' }, { Code: code });
      expect(translateAwsError(error)).toBeInstanceOf(EngineUnavailableError);
    },
  );

  it('TransactionCanceledException for an item too large -> EngineLimitError item_size with the reason', () => {
    const error = canceled({ Code: 'None' }, { Code: 'ValidationError', Message: 'Item size has exceeded the maximum allowed size' });
    const out = translateAwsError(error);
    expect(out).toBeInstanceOf(EngineLimitError);
    expect((out as EngineLimitError).limit).toBe('item_size');
    expect((out as EngineLimitError).message).toBe('Item size has exceeded the maximum allowed size');
  });

  it('TransactionCanceledException for a reason we do not know passes through', () => {
    const error = canceled({ Code: 'None' }, { Code: 'ValidationError', Message: 'something else' });
    expect(translateAwsError(error)).toBe(error);
  });

  it('ValidationException about item size -> EngineLimitError item_size', () => {
    const error = Object.assign(sdk('ValidationException', 400), { message: 'Item size to update has exceeded the maximum allowed size' });
    const out = translateAwsError(error);
    expect(out).toBeInstanceOf(EngineLimitError);
    expect((out as EngineLimitError).limit).toBe('item_size');
  });

  it('ValidationException about the start key is recognised, and passes through', () => {
    const error = Object.assign(sdk('ValidationException', 400), { message: 'The provided starting key is invalid' });
    expect(isInvalidStartKey(error)).toBe(true);
    expect(translateAwsError(error)).toBe(error);
    expect(isInvalidStartKey(Object.assign(sdk('ValidationException', 400), { message: 'Exclusive Start Key must have same size as table key schema' }))).toBe(true);
    expect(isInvalidStartKey(Object.assign(sdk('ValidationException', 400), { message: 'Invalid KeyConditionExpression' }))).toBe(false);
  });
});

describe('S3 mappings', () => {
  it('NoSuchUpload -> UploadNotFoundError (not a missing key, for all its 404)', () => {
    const error = sdk('NoSuchUpload', 404);
    expect(classifyAwsError(error)).toEqual({ kind: 'upload_not_found' });
    expect(isNotFound(error)).toBe(false);
    const out = translateAwsError(error);
    expect(out).toBeInstanceOf(UploadNotFoundError);
    expect((out as Error).cause).toBe(error);
  });

  it('EntityTooSmall -> EngineLimitError multipart_part', () => {
    const out = translateAwsError(sdk('EntityTooSmall', 400));
    expect(out).toBeInstanceOf(EngineLimitError);
    expect((out as EngineLimitError).limit).toBe('multipart_part');
  });

  it.each(['InvalidPart', 'InvalidPartOrder'])('%s -> InvalidPartError', (name) => {
    const error = sdk(name, 400);
    expect(classifyAwsError(error)).toEqual({ kind: 'invalid_part' });
    const out = translateAwsError(error);
    expect(out).toBeInstanceOf(InvalidPartError);
    expect(out).toBeInstanceOf(EngineError);
    expect((out as Error).cause).toBe(error);
  });

  it('NoSuchKey, NotFound and a bare 404 are a missing key, and pass through translation', () => {
    for (const error of [sdk('NoSuchKey', 404), sdk('NotFound', 404), sdk('Unknown', 404)]) {
      expect(isNotFound(error)).toBe(true);
      expect(translateAwsError(error)).toBe(error);
    }
  });

  it('NoSuchBucket is not a missing key: it passes through', () => {
    const error = sdk('NoSuchBucket', 404);
    expect(isNotFound(error)).toBe(false);
    expect(classifyAwsError(error)).toEqual({ kind: 'other' });
  });
});

describe('SQS, API Gateway and KMS', () => {
  it('MessageNotInflight is recognised and passes through', () => {
    const error = sdk('MessageNotInflight', 400);
    expect(isNotInFlight(error)).toBe(true);
    expect(translateAwsError(error)).toBe(error);
  });

  it('GoneException is recognised and passes through', () => {
    const error = sdk('GoneException', 410);
    expect(isGone(error)).toBe(true);
    expect(translateAwsError(error)).toBe(error);
  });

  it('KMS 5xx errors are unavailable; a missing or disabled key is not', () => {
    expect(translateAwsError(sdk('KMSInternalException', 500))).toBeInstanceOf(EngineUnavailableError);
    expect(translateAwsError(sdk('DependencyTimeoutException', 503))).toBeInstanceOf(EngineUnavailableError);
    const missing = sdk('NotFoundException', 400);
    expect(translateAwsError(missing)).toBe(missing);
    expect(isNotFound(missing)).toBe(false);
  });
});

describe('pass-through', () => {
  it.each([
    ['an unknown 4xx', sdk('AccessDenied', 403)],
    ['SQS QueueDoesNotExist', sdk('QueueDoesNotExist', 400)],
    ['KMS DisabledException', sdk('DisabledException', 400)],
    ['API Gateway ForbiddenException', sdk('ForbiddenException', 403)],
    ['a ValidationException about something else', sdk('ValidationException', 400)],
    ['a plain Error', new Error('bug')],
  ])('%s is returned unchanged', (_label, error) => {
    expect(classifyAwsError(error)).toEqual({ kind: 'other' });
    expect(translateAwsError(error)).toBe(error);
  });

  it('leaves the engine\'s own errors alone, whatever they look like', () => {
    const mismatch = new BlobMismatchError('size', { size: 1, sha256: 'x' });
    expect(translateAwsError(mismatch)).toBe(mismatch);
    const unavailable = new EngineUnavailableError('already');
    expect(translateAwsError(unavailable)).toBe(unavailable);
  });

  it('returns non-objects unchanged', () => {
    for (const value of [undefined, null, 'boom', 42]) expect(translateAwsError(value)).toBe(value);
  });
});

describe('callAws', () => {
  it('returns the result, and throws the translated error', async () => {
    expect(await callAws('Svc Op', async () => 7)).toBe(7);
    const error = sdk('SlowDown', 503);
    const out = await callAws('S3 PutObject', async () => {
      throw error;
    }).catch((e: unknown) => e);
    expect(out).toBeInstanceOf(EngineUnavailableError);
    expect((out as Error).message).toBe('S3 PutObject: SlowDown: SlowDown message');
    expect((out as Error).cause).toBe(error);
    const denied = sdk('AccessDenied', 403);
    await expect(
      callAws('S3 PutObject', async () => {
        throw denied;
      }),
    ).rejects.toBe(denied);
  });
});
