/**
 * The Events API's WebSocket streams on the local server (docs/events/stream.md), with `ws`. The
 * route's function decides (lambdas/http/handlers/events/stream.ts, through the whole chain); this
 * completes the handshake, registers the socket in the engine's LocalConnectionGateway under its
 * connection id, and runs a StreamSession (lambdas/events/stream.ts) that posts frames through that
 * gateway. Each worker process serves the sockets it accepted; delivery polls the shared inbox, so a
 * publish answered by any worker reaches a socket held by any other.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Engine } from '../engine/ports.js';
import { LocalConnectionGateway } from '../engine/embedded/connections.js';
import { CLOSE_CODES, StreamSession, type StreamGrant } from '../events/stream.js';
import { MAX_CLIENT_FRAME_BYTES } from '../events/stream-input.js';
import { releaseStreamSlot } from '../events/stream-slots.js';
import { bearerAuthorization, STREAM_SUBPROTOCOL } from '../http/websocket.js';
import { log } from '../shared/log.js';
import type { Upgrades } from './http-server.js';

/** A socket that answered no ping within this time is dropped (its slot freed, its frames leased again later). */
const PING_INTERVAL_MS = 30_000;
/** On shutdown, a client that does not finish the close handshake within this time is cut off. */
const CLOSE_GRACE_MS = 1_000;
const KEY_PATTERN = /^[+/0-9A-Za-z]{22}==$/;

export class LocalStreams implements Upgrades {
  private readonly wss: WebSocketServer;
  private readonly gateway: LocalConnectionGateway;
  private readonly open = new Map<WebSocket, StreamSession>();
  private readonly alive = new WeakSet<WebSocket>();
  private readonly pending = new Set<Promise<void>>();
  private readonly pinger: NodeJS.Timeout;
  /** Headers of the route's answer, for the 101 of the upgrade it accepted (ws writes the 101 itself). */
  private readonly answerHeaders = new WeakMap<IncomingMessage, Record<string, string>>();
  private closing = false;

  constructor(private readonly engine: Engine) {
    if (!(engine.connections instanceof LocalConnectionGateway)) throw new Error('local streams need the embedded engine\'s connection gateway');
    this.gateway = engine.connections;
    this.wss = new WebSocketServer({
      noServer: true,
      // ws closes the socket with 1009 on a larger frame (or fragmented message).
      maxPayload: MAX_CLIENT_FRAME_BYTES,
      perMessageDeflate: false,
      clientTracking: false,
      // The route refused every handshake without it; the bearer.<key> protocol is never echoed.
      handleProtocols: (protocols) => (protocols.has(STREAM_SUBPROTOCOL) ? STREAM_SUBPROTOCOL : false),
    });
    this.wss.on('headers', (lines: string[], req: IncomingMessage) => {
      const requestId = this.answerHeaders.get(req)?.['x-request-id'];
      if (requestId) lines.push(`x-request-id: ${requestId}`);
    });
    this.pinger = setInterval(() => {
      for (const ws of this.open.keys()) {
        if (!this.alive.has(ws)) {
          ws.terminate();
          continue;
        }
        this.alive.delete(ws);
        ws.ping();
      }
    }, PING_INTERVAL_MS);
    this.pinger.unref();
  }

  handshake(req: IncomingMessage): boolean {
    return (
      !this.closing &&
      req.method === 'GET' &&
      req.headers.upgrade?.toLowerCase() === 'websocket' &&
      KEY_PATTERN.test(req.headers['sec-websocket-key'] ?? '') &&
      req.headers['sec-websocket-version'] === '13'
    );
  }

  /** A browser's `bearer.<key>` subprotocol as its Authorization header. */
  extraHeaders(req: IncomingMessage): Record<string, string> | undefined {
    const authorization = bearerAuthorization(req.headers);
    return authorization ? { authorization } : undefined;
  }

  complete(req: IncomingMessage, socket: Duplex, head: Buffer, grant: StreamGrant, headers?: Record<string, string>): void {
    if (headers) this.answerHeaders.set(req, headers);
    if (this.closing) {
      this.abandon(grant);
      socket.destroy();
      return;
    }
    let served = false;
    socket.once('close', () => served || this.abandon(grant));
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      served = true;
      this.serve(ws, grant);
    });
  }

  abandon(grant: StreamGrant): void {
    this.track(releaseStreamSlot(this.engine, grant.slot).catch((error) => log.warn('stream slot release failed', { error: String(error) })));
  }

  private serve(ws: WebSocket, grant: StreamGrant): void {
    const { connectionId } = grant.slot;
    this.gateway.register(connectionId, ws);
    this.alive.add(ws);
    const session = new StreamSession(this.engine, grant, (code, reason) => {
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, reason);
    });
    this.open.set(ws, session);
    ws.on('pong', () => this.alive.add(ws));
    ws.on('message', (data, isBinary) => {
      if (isBinary) return session.fail(CLOSE_CODES.unsupportedData, 'binary frames are not accepted; send {"ack": [event ids]} as text');
      this.track(session.receive(data.toString()).catch((error) => log.error('stream frame failed', { error: String(error) })));
    });
    // A frame over maxPayload: ws reports it here and closes with 1009 itself.
    ws.on('error', (error) => log.debug('stream socket error', { error: String(error) }));
    ws.on('close', () => {
      this.open.delete(ws);
      this.gateway.unregister(connectionId);
      this.track(session.stop());
    });
  }

  private track(work: Promise<void>): void {
    this.pending.add(work);
    void work.finally(() => this.pending.delete(work));
  }

  /** Closes every socket with 1001 (going away), then frees their slots. */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.pinger);
    const sockets = [...this.open.keys()];
    await Promise.all(
      sockets.map(
        (ws) =>
          new Promise<void>((resolve) => {
            if (ws.readyState === ws.CLOSED) return resolve();
            const timer = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
            ws.once('close', () => {
              clearTimeout(timer);
              resolve();
            });
            ws.close(CLOSE_CODES.goingAway, 'server shutting down');
          }),
      ),
    );
    for (const session of this.open.values()) this.track(session.stop());
    await Promise.all([...this.pending]);
    this.wss.close();
  }
}
