/**
 * The stream's WebSocket handshake (spec 4.21 "Stream"; docs/events/stream.md "Opening"): the
 * subprotocols it offers, and a browser's publishable key among them. Transport only: the local
 * server (lambdas/local/streams.ts), the AWS WebSocket function (handlers/events/stream-socket.ts) and
 * the stream's route read the handshake here; what a stream is lives in lambdas/events/stream.ts.
 */
import { PlatformError } from '../shared/errors.js';

/** The subprotocol a client must offer (spec 4.21); the server answers with it. */
export const STREAM_SUBPROTOCOL = 'service.v1';
/** A browser, which cannot set Authorization on a WebSocket, offers its publishable key as `bearer.<key>`. */
export const BEARER_SUBPROTOCOL_PREFIX = 'bearer.';

/** The subprotocols a handshake offers (`Sec-WebSocket-Protocol`, comma-separated), and a bearer key among them. */
export function parseSubprotocols(header: string | undefined): { protocols: string[]; bearer?: string } {
  const protocols = (header ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const bearer = protocols.find((p) => p.startsWith(BEARER_SUBPROTOCOL_PREFIX))?.slice(BEARER_SUBPROTOCOL_PREFIX.length);
  return { protocols, bearer: bearer || undefined };
}

/**
 * A browser cannot set Authorization on a WebSocket: its `bearer.<key>` subprotocol stands for it (a
 * sent header wins). The header to add to the handshake's, if any.
 */
export function bearerAuthorization(headers: { authorization?: string; 'sec-websocket-protocol'?: string }): string | undefined {
  if (headers.authorization !== undefined) return undefined;
  const { bearer } = parseSubprotocols(headers['sec-websocket-protocol']);
  return bearer ? `Bearer ${bearer}` : undefined;
}

/** 426 upgrade_required unless the handshake offers `service.v1`. */
export function requireStreamProtocol(header: string | undefined): void {
  if (!parseSubprotocols(header).protocols.includes(STREAM_SUBPROTOCOL)) {
    throw new PlatformError('upgrade_required', `Open the stream as a WebSocket offering the subprotocol "${STREAM_SUBPROTOCOL}".`);
  }
}
