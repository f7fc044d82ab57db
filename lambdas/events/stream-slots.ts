/**
 * The limits on open streams (spec 4.21 "Stream"; docs/events/stream.md "Limits"), counted in the
 * key-value store as named slots with an owner (shared/leases.ts), shared by every process serving
 * the API:
 *
 *   evstream#sub#<subscription_id> / slot#<n>   an open socket of the subscription (n < 5)
 *   evstream#ws#<workspace_id>     / slot#<nn>  an open socket of the workspace (nn < 100)
 *
 * A slot item names its socket (`owner`, the connection id) and expires SLOT_TTL_SECONDS after its
 * last refresh, so the slots of a process killed without closing its sockets free themselves.
 */
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { claimSlots, refreshSlots, releaseSlots, slotOwners, type SlotPool } from '../shared/leases.js';

/** Open sockets at once, across every process: per subscription and per workspace. */
export const STREAM_LIMITS = { perSubscription: 5, perWorkspace: 100 } as const;
/** A slot item lives this long after its last refresh (where this process holds the socket and refreshes it). */
export const SLOT_TTL_SECONDS = 60;
/**
 * Where API Gateway holds the sockets nothing refreshes a slot: it lives as long as API Gateway keeps a
 * connection (2 hours), and $disconnect, or a post finding the socket gone, frees it earlier.
 */
export const CONNECTION_TTL_SECONDS = 2 * 60 * 60 + 60;
export const SLOT_REFRESH_MS = 20_000;

export const tooManyStreams = (message: string) => new PlatformError('too_many_streams', message);

/** The two slots an open socket holds. */
export interface StreamSlot {
  connectionId: string;
  workspaceId: string;
  subscriptionId: string;
  subscriptionSlot: string;
  workspaceSlot: string;
}

export const subscriptionSlots = (subscriptionId: string) => `evstream#sub#${subscriptionId}`;
export const workspaceSlots = (workspaceId: string) => `evstream#ws#${workspaceId}`;

const subscriptionPool = (subscriptionId: string): SlotPool => ({ pk: subscriptionSlots(subscriptionId), size: STREAM_LIMITS.perSubscription, width: 1 });
const workspacePool = (workspaceId: string): SlotPool => ({ pk: workspaceSlots(workspaceId), size: STREAM_LIMITS.perWorkspace, width: 2 });

const slotTtlSeconds = (engine: Engine) => (engine.connections.holdsSockets ? SLOT_TTL_SECONDS : CONNECTION_TTL_SECONDS);
const expiresIn = (engine: Engine, seconds: number) => Math.floor(engine.clock.now() / 1000) + seconds;

/**
 * Takes a slot of the subscription and one of the workspace in one transaction (each put only if the
 * slot is free, an expired slot counting as free), or throws 429 too_many_streams.
 */
export async function claimStreamSlot(engine: Engine, workspaceId: string, subscriptionId: string, connectionId: string): Promise<StreamSlot> {
  const pools = [subscriptionPool(subscriptionId), workspacePool(workspaceId)];
  const claim = await claimSlots(engine.kv, pools, connectionId, () => expiresIn(engine, slotTtlSeconds(engine)));
  if ('slots' in claim) return { connectionId, workspaceId, subscriptionId, subscriptionSlot: claim.slots[0].sk, workspaceSlot: claim.slots[1].sk };
  if ('busy' in claim) throw tooManyStreams('Too many streams are opening at once; retry.');
  if (claim.full === pools[0]) throw tooManyStreams(`A subscription has at most ${STREAM_LIMITS.perSubscription} open streams.`);
  throw tooManyStreams(`A workspace has at most ${STREAM_LIMITS.perWorkspace} open streams.`);
}

/** The connection ids holding a slot of the subscription (its open sockets). */
export function openStreamSlots(engine: Engine, subscriptionId: string): Promise<string[]> {
  return slotOwners(engine.kv, subscriptionSlots(subscriptionId), STREAM_LIMITS.perSubscription + 1);
}

const slotKeys = (slot: StreamSlot) => [
  { pk: subscriptionSlots(slot.subscriptionId), sk: slot.subscriptionSlot },
  { pk: workspaceSlots(slot.workspaceId), sk: slot.workspaceSlot },
];

/** Extends both slots' life; false when one is no longer this socket's (it expired and was taken). */
export function refreshStreamSlot(engine: Engine, slot: StreamSlot): Promise<boolean> {
  return refreshSlots(engine.kv, slotKeys(slot), slot.connectionId, expiresIn(engine, SLOT_TTL_SECONDS));
}

/** Frees both slots (those still this socket's). */
export function releaseStreamSlot(engine: Engine, slot: StreamSlot): Promise<void> {
  return releaseSlots(engine.kv, slotKeys(slot), slot.connectionId);
}
