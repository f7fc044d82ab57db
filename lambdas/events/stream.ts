/**
 * The WebSocket stream of a pull or websocket subscription (spec 4.21 "Stream"; docs/events/stream.md),
 * independent of the runtime holding the socket: frames go out through the engine's ConnectionGateway
 * port (a local `ws` socket, later API Gateway's PostToConnection), leases and acks are the inbox's
 * (inbox.ts), and the limits on open sockets are counted in the key-value store, shared by every
 * process serving the API.
 *
 *   evstream#sub#<subscription_id> / slot#<n>   an open socket of the subscription (n < 5)
 *   evstream#ws#<workspace_id>     / slot#<nn>  an open socket of the workspace (nn < 100)
 *
 * A slot item names its socket (`owner`) and expires SLOT_TTL_SECONDS after its last refresh, so the
 * slots of a process killed without closing its sockets free themselves.
 */
import type { Engine } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { ack, frameOf, LEASE_SECONDS, parseAck, pull } from './inbox.js';
import { onInboxWritten } from './inbox-signal.js';
import { streamCredentialRefusal, type StreamCredential } from './stream-credential.js';

/** The subprotocol a client must offer (spec 4.21); the server answers with it. */
export const STREAM_SUBPROTOCOL = 'service.v1';
/** A browser, which cannot set Authorization on a WebSocket, offers its publishable key as `bearer.<key>`. */
export const BEARER_SUBPROTOCOL_PREFIX = 'bearer.';
/** Largest client frame (spec section 8); a larger one closes the socket with 1009. */
export const MAX_CLIENT_FRAME_BYTES = 49_152;
/** Open sockets at once, across every process: per subscription and per workspace. */
export const STREAM_LIMITS = { perSubscription: 5, perWorkspace: 100 } as const;
/** Frames sent and neither acknowledged nor past their lease, per socket: the stream's flow control. */
export const MAX_UNACKED_FRAMES = 100;
/** How often an open stream looks at its inbox when nothing woke it. */
export const POLL_INTERVAL_MS = 150;
/** A slot item lives this long after its last refresh (where this process holds the socket and refreshes it). */
export const SLOT_TTL_SECONDS = 60;
/**
 * Where API Gateway holds the sockets nothing refreshes a slot: it lives as long as API Gateway keeps a
 * connection (2 hours), and $disconnect, or a post finding the socket gone, frees it earlier.
 */
export const CONNECTION_TTL_SECONDS = 2 * 60 * 60 + 60;
export const SLOT_REFRESH_MS = 20_000;

/** WebSocket close codes the stream uses (RFC 6455 7.4.1). */
export const CLOSE_CODES = {
  normal: 1000,
  goingAway: 1001,
  unsupportedData: 1003,
  policyViolation: 1008,
  messageTooBig: 1009,
  internalError: 1011,
} as const;

const upgradeRequired = (message: string) => new PlatformError('upgrade_required', message);
export const tooManyStreams = (message: string) => new PlatformError('too_many_streams', message);

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
    throw upgradeRequired(`Open the stream as a WebSocket offering the subprotocol "${STREAM_SUBPROTOCOL}".`);
  }
}

/** The stream's query: only `lease_seconds` (5 to 300, default 30), as a pull's body takes it. */
export function parseStreamQuery(query: Record<string, string>): { leaseSeconds: number } {
  for (const name of Object.keys(query)) {
    if (name !== 'lease_seconds') throw new PlatformError('invalid_query', `Unknown query parameter "${name}"; the stream takes only lease_seconds.`, name);
  }
  const raw = query.lease_seconds;
  if (raw === undefined) return { leaseSeconds: LEASE_SECONDS.default };
  const n = /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= LEASE_SECONDS.min && n <= LEASE_SECONDS.max)) {
    throw new PlatformError('invalid_limit', `lease_seconds is a whole number from ${LEASE_SECONDS.min} to ${LEASE_SECONDS.max}.`, 'lease_seconds');
  }
  return { leaseSeconds: n };
}

// ---------- open sockets, counted in the store ----------

export interface StreamSlot {
  connectionId: string;
  workspaceId: string;
  subscriptionId: string;
  subscriptionSlot: string;
  workspaceSlot: string;
}

export const subscriptionSlots = (subscriptionId: string) => `evstream#sub#${subscriptionId}`;
export const workspaceSlots = (workspaceId: string) => `evstream#ws#${workspaceId}`;
const slotName = (n: number, width: number) => `slot#${String(n).padStart(width, '0')}`;
const CLAIM_ATTEMPTS = 5;

async function freeSlot(engine: Engine, pk: string, size: number, width: number): Promise<string | undefined> {
  const taken = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk, limit: 100, cursor });
    for (const item of page.items) taken.add(item.sk);
    cursor = page.cursor;
  } while (cursor);
  const free: string[] = [];
  for (let n = 0; n < size; n++) if (!taken.has(slotName(n, width))) free.push(slotName(n, width));
  // A random free slot: two sockets opening at once rarely try the same one.
  return free.length ? free[Math.floor(Math.random() * free.length)] : undefined;
}

/**
 * Takes a slot of the subscription and one of the workspace in one transaction (each put only if the
 * slot is free, an expired slot counting as free), or throws 429 too_many_streams.
 */
export async function claimStreamSlot(engine: Engine, workspaceId: string, subscriptionId: string, connectionId: string): Promise<StreamSlot> {
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    const [subscriptionSlot, workspaceSlot] = await Promise.all([
      freeSlot(engine, subscriptionSlots(subscriptionId), STREAM_LIMITS.perSubscription, 1),
      freeSlot(engine, workspaceSlots(workspaceId), STREAM_LIMITS.perWorkspace, 2),
    ]);
    if (subscriptionSlot === undefined) throw tooManyStreams(`A subscription has at most ${STREAM_LIMITS.perSubscription} open streams.`);
    if (workspaceSlot === undefined) throw tooManyStreams(`A workspace has at most ${STREAM_LIMITS.perWorkspace} open streams.`);
    const expires_at = Math.floor(engine.clock.now() / 1000) + slotTtlSeconds(engine);
    try {
      await engine.kv.transact([
        { put: { pk: subscriptionSlots(subscriptionId), sk: subscriptionSlot, owner: connectionId, expires_at }, condition: { ifAbsent: true } },
        { put: { pk: workspaceSlots(workspaceId), sk: workspaceSlot, owner: connectionId, expires_at }, condition: { ifAbsent: true } },
      ]);
      return { connectionId, workspaceId, subscriptionId, subscriptionSlot, workspaceSlot };
    } catch (error) {
      // Another socket took one of the two meanwhile: look again.
      if (!(error instanceof TransactionCanceledError)) throw error;
    }
  }
  throw tooManyStreams('Too many streams are opening at once; retry.');
}

const slotTtlSeconds = (engine: Engine) => (engine.connections.holdsSockets ? SLOT_TTL_SECONDS : CONNECTION_TTL_SECONDS);

/** The connection ids holding a slot of the subscription (its open sockets). */
export async function openStreamSlots(engine: Engine, subscriptionId: string): Promise<string[]> {
  const page = await engine.kv.query({ pk: subscriptionSlots(subscriptionId), limit: STREAM_LIMITS.perSubscription + 1 });
  return page.items.map((item) => String(item.owner));
}

const slotKeys = (slot: StreamSlot) => [
  { pk: subscriptionSlots(slot.subscriptionId), sk: slot.subscriptionSlot },
  { pk: workspaceSlots(slot.workspaceId), sk: slot.workspaceSlot },
];

/** Extends both slots' life; false when one is no longer this socket's (it expired and was taken). */
export async function refreshStreamSlot(engine: Engine, slot: StreamSlot): Promise<boolean> {
  const expires_at = Math.floor(engine.clock.now() / 1000) + SLOT_TTL_SECONDS;
  try {
    await Promise.all(slotKeys(slot).map((key) => engine.kv.update({ key, set: { expires_at }, condition: { ifEquals: { owner: slot.connectionId } } })));
    return true;
  } catch (error) {
    if (error instanceof ConditionFailedError) return false;
    throw error;
  }
}

/** Frees both slots (those still this socket's). */
export async function releaseStreamSlot(engine: Engine, slot: StreamSlot): Promise<void> {
  await Promise.all(
    slotKeys(slot).map((key) =>
      engine.kv.delete(key, { ifEquals: { owner: slot.connectionId } }).catch((error) => {
        if (!(error instanceof ConditionFailedError)) throw error;
      }),
    ),
  );
}

// ---------- an open stream ----------

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
  if (!frame || typeof frame !== 'object' || Array.isArray(frame)) throw new PlatformError('invalid_body', 'A client frame is {"ack": [event ids]}.');
  const { ack: list, ...rest } = frame as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw new PlatformError('unknown_field', `Unknown field "${unknown}"; a client frame is {"ack": [event ids]}.`);
  return parseAck({ ids: list });
}

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
