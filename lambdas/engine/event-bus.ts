/**
 * The event-bus port (shaped like EventBridge's PutEvents): the domain hands it entries, an adapter
 * puts them on the buses (engine/aws/event-bus.ts, against AWS or any EventBridge-compatible
 * endpoint). Domain code never sees an SDK; it sees this interface and these limits.
 */

/** PutEvents takes at most 10 entries a call (docs/events/eventbridge.md). */
export const PUT_EVENTS_MAX_ENTRIES = 10;
/** ... and at most 256 KB a call, entries' sizes as EventBridge counts them (entryBytes). */
export const PUT_EVENTS_MAX_BYTES = 256 * 1024;

export interface BusEntry {
  /** The bus's ARN (EventBridge takes an ARN as EventBusName, which a cross-account bus needs). */
  eventBusArn: string;
  source: string;
  detailType: string;
  /** JSON text: the event's envelope. */
  detail: string;
  time: Date;
}

/** One entry's result: put, or EventBridge's ErrorCode for it. */
export type BusEntryResult = { ok: true } | { ok: false; code: string };

export interface EventBusSender {
  /**
   * One PutEvents call on `region`: at most PUT_EVENTS_MAX_ENTRIES entries of at most
   * PUT_EVENTS_MAX_BYTES in all. Answers each entry's result in order; throws when the whole call
   * failed (the error's `name` is the service's error code, e.g. ThrottlingException).
   */
  putEvents(region: string, entries: BusEntry[]): Promise<BusEntryResult[]>;
}

/**
 * An entry's size as EventBridge counts it against the 256 KB of a call: Time (14 bytes), Source,
 * DetailType and Detail as UTF-8 bytes; the bus name is counted too (more than EventBridge does: a
 * batch never goes over).
 */
export const entryBytes = (e: BusEntry) => 14 + Buffer.byteLength(e.source) + Buffer.byteLength(e.detailType) + Buffer.byteLength(e.detail) + Buffer.byteLength(e.eventBusArn);
