/** Typed engine errors. Adapters translate their SDK's errors into these; services map them to API errors. */

export class EngineError extends Error {
  override name = 'EngineError';
}

/** A single write's condition did not hold. */
export class ConditionFailedError extends EngineError {
  override name = 'ConditionFailedError';
  constructor(message = 'condition failed') {
    super(message);
  }
}

/** A transaction was cancelled; `failed` lists the indexes of the writes whose condition did not hold. */
export class TransactionCanceledError extends EngineError {
  override name = 'TransactionCanceledError';
  constructor(readonly failed: number[]) {
    super(`transaction cancelled: condition failed at ${failed.join(', ') || 'unknown'}`);
  }
}

export type LimitName =
  | 'item_size'
  | 'item_value'
  | 'transaction_items'
  | 'transaction_size'
  | 'transaction_duplicate_item'
  | 'batch_get_items'
  | 'queue_delay'
  | 'queue_message_size'
  | 'queue_group'
  | 'queue_visibility'
  | 'queue_batch'
  | 'multipart_part';

/** A request the real service would refuse for one of its limits. */
export class EngineLimitError extends EngineError {
  override name = 'EngineLimitError';
  constructor(readonly limit: LimitName, message: string) {
    super(message);
  }
}

/** Bytes did not match the expected SHA-256 or size; nothing was kept. */
export class BlobMismatchError extends EngineError {
  override name = 'BlobMismatchError';
  constructor(readonly mismatch: 'sha256' | 'size', readonly actual: { sha256: string; size: number }) {
    super(`blob ${mismatch} mismatch`);
  }
}

/** Unknown multipart upload (aborted, completed or never created). */
export class UploadNotFoundError extends EngineError {
  override name = 'UploadNotFoundError';
}

/**
 * A multipart completion listed a part that is not the one uploaded under its number (wrong etag, or
 * a part number never uploaded), or listed the parts out of ascending order (S3's InvalidPart and
 * InvalidPartOrder). Nothing was joined; the upload stays open.
 */
export class InvalidPartError extends EngineError {
  override name = 'InvalidPartError';
}

/** The backing service is unreachable or throttling; callers answer 503. */
export class EngineUnavailableError extends EngineError {
  override name = 'EngineUnavailableError';
}
