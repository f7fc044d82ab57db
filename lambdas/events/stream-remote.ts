/**
 * Streams whose sockets API Gateway holds (AWS; docs/decisions/stream-url-aws.md). No process keeps a
 * socket or a session: $connect records what the connection serves (the connection table, through
 * the ConnectionGateway), each client frame and each close is its own invocation, and frames go out
 * when something wakes the subscription's streams:
 *
 *   - a publish wrote to the subscription's inbox (publish() calls wakeStreams),
 *   - a socket opened (a wake one second later: API Gateway takes posts only once $connect returned),
 *   - a client acknowledged frames (the ack's invocation sends the next ones itself),
 *   - a lease ended (every delivery queues a wake for the end of its lease, so an unacknowledged
 *     frame is sent again).
 *
 * A wake is a `streams` queue message naming the subscription; its consumer sends each open socket of
 * the subscription what it can lease, oldest first, as the local StreamSession does. Where the engine
 * holds its sockets in process (the local server), wakeStreams does nothing: sessions poll instead.
 */
import type { ConnectionRecord, Engine, QueueConsumer } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { log, withLogIds } from '../shared/log.js';
import { ack, frameOf, pull } from './inbox.js';
import { CREDENTIAL_CLOSE_CODES, openStreamCredential, sealStreamCredential, streamCredentialRefusal } from './stream-credential.js';
import { MAX_UNACKED_FRAMES, type StreamGrant } from './stream.js';
import { parseClientFrame } from './stream-input.js';
import { CONNECTION_TTL_SECONDS, openStreamSlots, releaseStreamSlot, type StreamSlot } from './stream-slots.js';

export const STREAMS_QUEUE = 'streams';
/** The first wake of a new socket: API Gateway refuses posts to a connection whose $connect has not returned. */
export const CONNECT_WAKE_DELAY_SECONDS = 1;

/** A `streams` queue message. */
export interface StreamWake {
  subscription_id: string;
}

/** What the connection table keeps of a stream's socket. */
interface StreamConnection {
  workspace_id: string;
  subscription_id: string;
  lease_seconds: number;
  subscription_slot: string;
  workspace_slot: string;
  /** The handshake's credential, sealed (stream-credential.ts): checked again before frames go out. */
  credential?: string;
}

const slotOf = (connectionId: string, c: StreamConnection): StreamSlot => ({
  connectionId,
  workspaceId: c.workspace_id,
  subscriptionId: c.subscription_id,
  subscriptionSlot: c.subscription_slot,
  workspaceSlot: c.workspace_slot,
});

function asStreamConnection(record: ConnectionRecord | undefined): StreamConnection | undefined {
  if (!record) return undefined;
  const { workspace_id, subscription_id, lease_seconds, subscription_slot, workspace_slot, credential } = record;
  if (typeof workspace_id !== 'string' || typeof subscription_id !== 'string' || typeof lease_seconds !== 'number') return undefined;
  return {
    workspace_id,
    subscription_id,
    lease_seconds,
    subscription_slot: String(subscription_slot),
    workspace_slot: String(workspace_slot),
    credential: typeof credential === 'string' ? credential : undefined,
  };
}

/** Queues a wake of each subscription's streams (nothing where sockets are held in process). */
export async function wakeStreams(engine: Engine, subscriptionIds: Iterable<string>, delaySeconds = 0): Promise<void> {
  if (engine.connections.holdsSockets) return;
  await Promise.all(
    [...new Set(subscriptionIds)].map((subscription_id) =>
      engine.queue.send(STREAMS_QUEUE, JSON.stringify({ subscription_id } satisfies StreamWake), delaySeconds ? { delaySeconds } : undefined),
    ),
  );
}

/** $connect accepted: remember the connection, and wake its subscription once the socket is open. */
export async function openRemoteStream(engine: Engine, grant: StreamGrant): Promise<void> {
  const record: StreamConnection = {
    workspace_id: grant.workspaceId,
    subscription_id: grant.subscriptionId,
    lease_seconds: grant.leaseSeconds,
    subscription_slot: grant.slot.subscriptionSlot,
    workspace_slot: grant.slot.workspaceSlot,
    credential: await sealStreamCredential(engine.secret, grant.slot.connectionId, grant.credential),
  };
  await engine.connections.remember(grant.slot.connectionId, { ...record }, CONNECTION_TTL_SECONDS);
  await wakeStreams(engine, [grant.subscriptionId], CONNECT_WAKE_DELAY_SECONDS);
}

/** $disconnect (or a socket found gone): free its slots and forget it. */
export async function closeRemoteStream(engine: Engine, connectionId: string): Promise<void> {
  const connection = asStreamConnection(await engine.connections.recall(connectionId));
  if (connection) await releaseStreamSlot(engine, slotOf(connectionId, connection));
  await engine.connections.forget(connectionId);
}

/**
 * A client frame on $default: `{"ack": [ids]}` acknowledges, then the socket gets its next frames.
 * Anything else (or a frame over the limit) ends the connection: API Gateway cannot send our close
 * code, so the socket is closed without one (docs/events/stream.md "In AWS").
 */
export async function receiveRemoteFrame(engine: Engine, connectionId: string, text: string): Promise<void> {
  const connection = asStreamConnection(await engine.connections.recall(connectionId));
  if (!connection) return engine.connections.disconnect(connectionId);
  let ids: string[];
  try {
    ids = parseClientFrame(text);
  } catch (error) {
    if (!(error instanceof PlatformError)) throw error;
    log.info('stream frame refused; closing', { connection: connectionId, code: error.code });
    await closeRemoteStream(engine, connectionId);
    return engine.connections.disconnect(connectionId);
  }
  if (!(await credentialHolds(engine, connectionId, connection))) return;
  // Its own leases only: an ack after its lease ended must not take a message another consumer leased since.
  await ack(engine, connection.workspace_id, connection.subscription_id, ids, connectionId);
  await sendFrames(engine, connectionId, connection);
}

/** The consumer of a wake: every open socket of the subscription gets what it can lease. */
export async function deliverToStreams(engine: Engine, subscriptionId: string): Promise<void> {
  for (const connectionId of await openStreamSlots(engine, subscriptionId)) {
    const connection = asStreamConnection(await engine.connections.recall(connectionId));
    if (!connection) continue;
    if (!(await credentialHolds(engine, connectionId, connection))) continue;
    await sendFrames(engine, connectionId, connection);
  }
}

/**
 * The connection's credential checked again (as a call's, through the credential cache): when it no
 * longer holds (a key or its organization disabled, a token expired, an origin no longer listed) the
 * connection is deleted, and gets no further frame. API Gateway cannot send our close code 4401/4403:
 * the client sees the socket close (docs/events/stream.md "Credential changes"). A connection
 * remembered without a credential (opened before it was kept) is treated as revoked.
 */
async function credentialHolds(engine: Engine, connectionId: string, connection: StreamConnection): Promise<boolean> {
  const credential = await openStreamCredential(engine.secret, connectionId, connection.credential);
  const refusal = credential
    ? await streamCredentialRefusal(engine, credential, connection.workspace_id)
    : { code: CREDENTIAL_CLOSE_CODES.revoked, reason: 'invalid_credentials: no credential kept for this connection' };
  if (!refusal) return true;
  log.info('stream credential no longer holds; closing', { connection: connectionId, code: refusal.code, reason: refusal.reason });
  await closeRemoteStream(engine, connectionId);
  await engine.connections.disconnect(connectionId);
  return false;
}

/**
 * Leases up to MAX_UNACKED_FRAMES messages and posts one envelope per frame; a wake is queued for the
 * end of their lease, so those left unacknowledged go out again. A socket found gone is closed here
 * (its slots freed); what it had leased returns after the lease.
 */
async function sendFrames(engine: Engine, connectionId: string, connection: StreamConnection): Promise<void> {
  const messages = await pull(engine, connection.subscription_id, MAX_UNACKED_FRAMES, connection.lease_seconds, connectionId);
  if (!messages.length) return;
  await wakeStreams(engine, [connection.subscription_id], connection.lease_seconds + 1);
  for (const message of messages) {
    if (!(await engine.connections.post(connectionId, JSON.stringify(frameOf(message))))) {
      await closeRemoteStream(engine, connectionId);
      return;
    }
  }
}

/**
 * The `streams` queue's consumer: one delivery per subscription a batch names (wakes repeat; one pass
 * serves them all). A subscription whose delivery failed on the engine has its messages returned to
 * the queue; a malformed message is dropped.
 */
export function streamsConsumer(engine: Engine): QueueConsumer {
  return async (messages) => {
    const bySubscription = new Map<string, string[]>();
    for (const message of messages) {
      const subscriptionId = wakeOf(message.body);
      if (subscriptionId === undefined) continue;
      bySubscription.set(subscriptionId, [...(bySubscription.get(subscriptionId) ?? []), message.id]);
    }
    const failed: string[] = [];
    await Promise.all(
      // One pass serves every wake of a subscription: its lines name the first.
      [...bySubscription].map(([subscriptionId, ids]) =>
        withLogIds({ message_id: ids[0] }, async () => {
          try {
            await deliverToStreams(engine, subscriptionId);
          } catch (error) {
            log.warn('stream delivery failed; the wake returns to the queue', { subscription: subscriptionId, wakes: ids, error: String(error) });
            failed.push(...ids);
          }
        }),
      ),
    );
    return { failed };
  };
}

function wakeOf(body: string): string | undefined {
  try {
    const wake = JSON.parse(body) as Partial<StreamWake>;
    return typeof wake.subscription_id === 'string' && wake.subscription_id ? wake.subscription_id : undefined;
  } catch {
    return undefined;
  }
}
