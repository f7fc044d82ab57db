/**
 * An open stream of a pull or websocket subscription (spec 4.21 "Stream"; docs/events/stream.md),
 * independent of the runtime holding the socket: frames go out through the engine's ConnectionGateway
 * port (a local `ws` socket, later API Gateway's PostToConnection), leases and acks are the inbox's
 * (inbox.ts). Its slots are stream-slots.ts', what the client sends is parsed in stream-input.ts, and
 * the WebSocket handshake is the HTTP side's (lambdas/http/websocket.ts).
 */
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { ack, frameOf, pull } from './inbox.js';
import { onInboxWritten } from './inbox-signal.js';
import { streamCredentialRefusal, type StreamCredential } from './stream-credential.js';
import { parseClientFrame } from './stream-input.js';
import { refreshStreamSlot, releaseStreamSlot, SLOT_REFRESH_MS, type StreamSlot } from './stream-slots.js';

/** Frames sent and neither acknowledged nor past their lease, per socket: the stream's flow control. */
export const MAX_UNACKED_FRAMES = 100;
/** How often an open stream looks at its inbox when nothing woke it. */
export const POLL_INTERVAL_MS = 150;

/** WebSocket close codes the stream uses (RFC 6455 7.4.1). */
export const CLOSE_CODES = {
  normal: 1000,
  goingAway: 1001,
  unsupportedData: 1003,
  policyViolation: 1008,
  messageTooBig: 1009,
  internalError: 1011,
} as const;

/** What a stream's route accepted: everything the runtime needs to serve the socket. */
export interface StreamGrant {
  workspaceId: string;
  subscriptionId: string;
  leaseSeconds: number;
  /** The subprotocol to answer with. */
  protocol: string;
  slot: StreamSlot;
  /** The handshake's credential, checked again while the stream is open (stream-credential.ts). */
  credential: StreamCredential;
}

/** How a session ends its socket; the runtime closes it with the code. */
export type CloseSocket = (code: number, reason: string) => void;

/**
 * One open socket: leases the subscription's messages (oldest first) and posts one envelope per frame
 * through the ConnectionGateway, at most MAX_UNACKED_FRAMES unacknowledged at once; takes the client's
 * `{"ack": [ids]}` frames; a frame left unacknowledged is sent again once its lease ends (by whichever
 * socket of the subscription leases it next). It looks at the inbox every POLL_INTERVAL_MS, and at
 * once when a publish in this process wrote to it.
 */
export class StreamSession {
  /** Frames sent and not acknowledged: event id to the end of its lease (engine clock, ms). */
  private readonly unacked = new Map<string, number>();
  /** The lease_id each unacknowledged frame was sent under: a client's ack by event id acks that lease only. */
  private readonly leases = new Map<string, string>();
  private closed = false;
  private pumping = false;
  private again = false;
  private poll: NodeJS.Timeout | undefined;
  private readonly refresh: NodeJS.Timeout;
  private readonly unsubscribe: () => void;
  private released: Promise<void> | undefined;

  constructor(
    private readonly engine: Engine,
    private readonly grant: StreamGrant,
    private readonly closeSocket: CloseSocket,
  ) {
    this.unsubscribe = onInboxWritten(grant.subscriptionId, () => this.wake());
    this.refresh = setInterval(() => {
      refreshStreamSlot(engine, grant.slot).then(
        (kept) => kept || this.fail(CLOSE_CODES.goingAway, 'stream slot lost; reconnect'),
        (error) => log.warn('stream slot refresh failed', { error: String(error) }),
      );
    }, SLOT_REFRESH_MS);
    this.refresh.unref();
    this.wake();
  }

  get connectionId(): string {
    return this.grant.slot.connectionId;
  }

  /** Pulls now (or right after the pull under way). */
  wake(): void {
    if (this.closed) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    clearTimeout(this.poll);
    this.poll = undefined;
    void this.pump();
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      do {
        this.again = false;
        // The credential again (cached for CREDENTIAL_CACHE_MS): a revoked one gets no further frame.
        const refusal = await streamCredentialRefusal(this.engine, this.grant.credential, this.grant.workspaceId);
        if (this.closed) return;
        if (refusal) return this.fail(refusal.code, refusal.reason);
        const now = this.engine.clock.now();
        for (const [id, until] of this.unacked) {
          if (until <= now) {
            this.unacked.delete(id);
            this.leases.delete(id);
          }
        }
        const room = Math.min(MAX_UNACKED_FRAMES - this.unacked.size, 100);
        if (room <= 0) break;
        const messages = await pull(this.engine, this.grant.subscriptionId, room, this.grant.leaseSeconds);
        for (const message of messages) {
          if (this.closed) return;
          // Counted before it is sent: an ack may come back before post() resolves.
          this.unacked.set(message.event_id, now + this.grant.leaseSeconds * 1000);
          this.leases.set(message.event_id, message.lease_id);
          if (!(await this.engine.connections.post(this.connectionId, JSON.stringify(frameOf(message))))) {
            // The socket is gone; the message comes back after its lease.
            this.closed = true;
            return;
          }
        }
        if (messages.length === room) this.again = true;
      } while (this.again && !this.closed);
    } catch (error) {
      log.error('stream delivery failed', { subscription: this.grant.subscriptionId, error: String((error as Error)?.stack ?? error) });
      this.fail(CLOSE_CODES.internalError, 'delivery failed; reconnect');
    } finally {
      this.pumping = false;
      if (!this.closed) {
        if (this.again) this.wake();
        else this.poll = setTimeout(() => this.wake(), POLL_INTERVAL_MS);
      }
    }
  }

  /**
   * A text frame from the client: `{"ack": [event ids]}` (1 to 100 ids). Anything else closes the
   * socket with 1008 (policy violation), its reason saying what was wrong.
   */
  async receive(text: string): Promise<void> {
    if (this.closed) return;
    let ids: string[];
    try {
      ids = parseClientFrame(text);
    } catch (error) {
      if (!(error instanceof PlatformError)) throw error;
      return this.fail(CLOSE_CODES.policyViolation, `${error.code}: ${error.message}`);
    }
    try {
      await ack(this.engine, this.grant.workspaceId, this.grant.subscriptionId, ids.map((id) => this.leases.get(id) ?? id));
    } catch (error) {
      log.error('stream ack failed', { subscription: this.grant.subscriptionId, error: String(error) });
      return this.fail(CLOSE_CODES.internalError, 'ack failed; unacknowledged frames come again');
    }
    for (const id of ids.map((x) => x.split('.')[0])) {
      this.unacked.delete(id);
      this.leases.delete(id);
    }
    this.wake();
  }

  /** Ends the session with a close code sent to the client. */
  fail(code: number, reason: string): void {
    if (this.closed) return;
    this.closeSocket(code, closeReason(reason));
    void this.stop();
  }

  /** The socket closed (or is closing): stop delivering and free its slots. Idempotent. */
  stop(): Promise<void> {
    this.closed = true;
    clearTimeout(this.poll);
    clearInterval(this.refresh);
    this.unsubscribe();
    return (this.released ??= releaseStreamSlot(this.engine, this.grant.slot).catch((error) => {
      // The slots expire on their own within SLOT_TTL_SECONDS.
      log.warn('stream slot release failed', { error: String(error) });
    }));
  }
}

/** A close reason is at most 123 bytes (RFC 6455 5.5: a control frame's payload is 125 bytes). */
function closeReason(reason: string): string {
  let out = reason;
  while (Buffer.byteLength(out) > 123) out = out.slice(0, -1);
  return out;
}
