/** Checks both blob adapters make, so a request S3 would refuse is refused locally too. */
import type { BlobExpectation, StoredBlob } from '../ports.js';
import { BlobMismatchError, EngineLimitError, InvalidPartError } from '../errors.js';
import { LIMITS } from '../limits.js';

export function checkExpectation(stored: StoredBlob, expect?: BlobExpectation): void {
  if (expect?.size !== undefined && stored.size !== expect.size) throw new BlobMismatchError('size', stored);
  if (expect?.sha256 !== undefined && stored.sha256 !== expect.sha256.toLowerCase()) throw new BlobMismatchError('sha256', stored);
}

export function checkPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > LIMITS.multipartMaxParts) {
    throw new EngineLimitError('multipart_part', `part number must be an integer in 1..${LIMITS.multipartMaxParts}, got ${partNumber}`);
  }
}

export function checkPartList(parts: { partNumber: number }[]): void {
  if (parts.length === 0) throw new EngineLimitError('multipart_part', 'a multipart upload needs at least one part');
  parts.forEach((part, i) => {
    checkPartNumber(part.partNumber);
    // S3 answers InvalidPartOrder (a repeated number included).
    if (i > 0 && part.partNumber <= parts[i - 1].partNumber) {
      throw new InvalidPartError('parts must be listed in strictly ascending part number order');
    }
  });
}
