/**
 * What a client sends a stream (spec 4.21 "Stream"; docs/events/stream.md): the handshake's query and
 * the ack frames, parsed by zod schemas through shared/validate.ts as every body and query is.
 */
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseBody, parseQuery, queryInteger } from '../shared/validate.js';
import { LEASE_SECONDS, parseAck } from './inbox.js';

/** Largest client frame (spec section 8); a larger one closes the socket with 1009. */
export const MAX_CLIENT_FRAME_BYTES = 49_152;

const schemas = onFirstUse(() => ({
  query: z.strictObject({
    lease_seconds: queryInteger(LEASE_SECONDS, LEASE_SECONDS.default).check(z.describe('How long each frame stays leased before it is sent again, unless acknowledged.')),
  }),
  // The ids are an ack's (inbox.ts parseAck): the frame only names them `ack`.
  frame: z.strictObject({ ack: z.unknown().check(z.describe('The event ids to acknowledge (1 to 100), as POST .../ack takes them.')) }),
}));

/** GET .../stream's query: `{lease_seconds?}`. */
export const streamQuerySchema = () => schemas().query;
/** A client frame: `{"ack": [event ids]}`. */
export const clientFrameSchema = () => schemas().frame;

/** The stream's query: only `lease_seconds` (5 to 300, default 30, as a pull's body takes it; out of range: invalid_limit). */
export function parseStreamQuery(query: Record<string, string>): { leaseSeconds: number } {
  const { lease_seconds } = parseQuery(streamQuerySchema(), query, { fieldCodes: { lease_seconds: 'invalid_limit' }, takes: 'the stream takes only lease_seconds' });
  return { leaseSeconds: lease_seconds };
}

/**
 * The ids a client frame acknowledges: the frame is `{"ack": [event ids]}` (1 to 100 ids) of at most
 * MAX_CLIENT_FRAME_BYTES; anything else throws the PlatformError that ends the socket.
 */
export function parseClientFrame(text: string): string[] {
  if (Buffer.byteLength(text) > MAX_CLIENT_FRAME_BYTES) throw new PlatformError('payload_too_large', `A client frame is at most ${MAX_CLIENT_FRAME_BYTES} bytes.`);
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch {
    throw new PlatformError('invalid_body', 'A client frame is JSON: {"ack": [event ids]}.');
  }
  const { ack } = parseBody(clientFrameSchema(), frame, { unknownField: 'unknown_field' });
  return parseAck({ ids: ack });
}
