/**
 * The EventBridge destination (docs/events/eventbridge.md), an extension beside the spec's three
 * delivery modes: `delivery: {mode: "eventbridge", event_bus_arn, detail_type?}`. Each delivery puts the
 * event's envelope as `detail` on the bus through the event-bus port (engine/event-bus.ts), with the
 * webhooks' retry ladder, dead letters, replay and counters (delivery.ts). A bus must be on the
 * organization's allow-list (`org eventbridge-allow` in the admin CLI): checked when a subscription is
 * created and again at every attempt.
 *
 *   evbus#<organization> / <event_bus_arn>   a bus the organization registered
 */
import type { Engine, KvItem } from '../engine/ports.js';
import { PUT_EVENTS_MAX_BYTES, PUT_EVENTS_MAX_ENTRIES, entryBytes, type BusEntry, type BusEntryResult, type EventBusSender } from '../engine/event-bus.js';
import { PlatformError } from '../shared/errors.js';

/** `arn:<partition>:events:<region>:<account>:event-bus/<name>`; names as EventBridge allows them. */
const BUS_ARN = /^arn:aws(?:-cn|-us-gov)?:events:([a-z]{2}(?:-[a-z]+)+-\d):(\d{12}):event-bus\/([A-Za-z0-9._\-/]{1,256})$/;
export const MAX_DETAIL_TYPE_CHARS = 128;
/** The `source` of every entry; `detail.source` is the event's own source (the envelope). */
export const ENTRY_SOURCE = 'platform.events';

export const eventBusKey = (organizationId: string, arn: string) => ({ pk: `evbus#${organizationId}`, sk: arn });

/** The bus ARN's region, or undefined when `arn` is not an event bus ARN. */
export function busRegion(arn: string): string | undefined {
  return BUS_ARN.exec(arn)?.[1];
}

// ---------- the organization's allow-list (admin CLI) ----------

export class EventBusAllowListError extends Error {
  override name = 'EventBusAllowListError';
}

export async function allowEventBus(engine: Engine, organizationId: string, arn: string): Promise<{ organization_id: string; event_bus_arn: string; allowed_at: string }> {
  if (!busRegion(arn)) throw new EventBusAllowListError(`not an event bus ARN: ${arn} (arn:aws:events:<region>:<account>:event-bus/<name>)`);
  const allowed_at = new Date(engine.clock.now()).toISOString();
  await engine.kv.put({ ...eventBusKey(organizationId, arn), allowed_at });
  return { organization_id: organizationId, event_bus_arn: arn, allowed_at };
}

export async function revokeEventBus(engine: Engine, organizationId: string, arn: string): Promise<{ organization_id: string; event_bus_arn: string; revoked: true }> {
  await engine.kv.delete(eventBusKey(organizationId, arn));
  return { organization_id: organizationId, event_bus_arn: arn, revoked: true };
}

export async function listEventBuses(engine: Engine, organizationId: string): Promise<{ event_bus_arn: string; allowed_at: string }[]> {
  const out: { event_bus_arn: string; allowed_at: string }[] = [];
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk: eventBusKey(organizationId, '').pk, cursor });
    out.push(...page.items.map((i) => ({ event_bus_arn: String(i.sk), allowed_at: String(i.allowed_at) })));
    cursor = page.cursor;
  } while (cursor);
  return out;
}

export const eventBusAllowed = async (engine: Engine, organizationId: string, arn: string) => !!(await engine.kv.get(eventBusKey(organizationId, arn)));

// ---------- a subscription's delivery at creation ----------

const invalidDelivery = (message: string) => new PlatformError('invalid_delivery', message, 'delivery');

/**
 * Whether this deployment can deliver to `arn` for the organization: an endpoint to put on (AWS, or
 * AWS_ENDPOINT_URL locally) and the bus on the organization's allow-list.
 */
export async function checkBusDestination(engine: Engine, organizationId: string, arn: string, endpointConfigured: boolean): Promise<void> {
  if (engine.name !== 'aws' && !endpointConfigured) {
    throw invalidDelivery('This server has no EventBridge endpoint: set AWS_ENDPOINT_URL to an EventBridge-compatible endpoint (and AWS credentials for it) to deliver to an event bus locally.');
  }
  if (!(await eventBusAllowed(engine, organizationId, arn))) {
    throw invalidDelivery(`The event bus ${arn} is not registered for this organization: an operator allows it with \`org eventbridge-allow --org ${organizationId} --arn ${arn}\`.`);
  }
}

// ---------- delivery ----------

export type BusDeliveryError = `eventbridge_${string}`;
export type BusOutcome = { ok: true } | { ok: false; error: BusDeliveryError };

/** The entry of one event for one subscription: the envelope as `detail`. */
export function busEntryOf(delivery: { event_bus_arn: string; detail_type?: string }, event: KvItem): BusEntry {
  const envelope = String(event.envelope);
  const time = (JSON.parse(envelope) as { time?: string }).time;
  return { eventBusArn: delivery.event_bus_arn, source: ENTRY_SOURCE, detailType: delivery.detail_type ?? String(event.type), detail: envelope, time: time ? new Date(time) : new Date() };
}

/** `eventbridge_<Code>` from an entry's ErrorCode or a failed call's error name (anything else: `eventbridge_error`). */
export const busError = (code: unknown): BusDeliveryError => (typeof code === 'string' && /^[A-Za-z0-9_.]{1,64}$/.test(code) ? `eventbridge_${code}` : 'eventbridge_error');

/** What an attempt holds while the batch it is in has not gone out yet. */
export interface BusSlot {
  /** Puts the entry with the batch; answers its own result. */
  put(entry: BusEntry): Promise<BusOutcome>;
  /** This attempt puts nothing (another mode, dropped, failed): the batch stops waiting for it. */
  leave(): void;
}

/**
 * Groups the entries of one consumer batch into PutEvents calls: a call per region, at most
 * PUT_EVENTS_MAX_ENTRIES entries and PUT_EVENTS_MAX_BYTES each. The batch goes out once every slot
 * has put or left; each entry's result goes back to its own attempt (a failed entry is retried alone,
 * on its own ladder), and a failed call fails each of its entries.
 */
export class PutEventsBatch {
  private waiting = 0;
  private readonly entries: { entry: BusEntry; region: string; resolve: (o: BusOutcome) => void }[] = [];

  constructor(private readonly sender: EventBusSender) {}

  slot(): BusSlot {
    this.waiting++;
    let done = false;
    const finish = () => {
      if (done) return false;
      done = true;
      if (--this.waiting === 0) void this.flush();
      return true;
    };
    return {
      put: (entry) =>
        new Promise<BusOutcome>((resolve) => {
          const region = busRegion(entry.eventBusArn);
          if (!region) return resolve({ ok: false, error: 'eventbridge_invalid_arn' });
          if (done) return void this.send(region, [{ entry, resolve }]); // a second put: alone
          this.entries.push({ entry, region, resolve });
          finish();
        }),
      leave: () => void finish(),
    };
  }

  private async flush(): Promise<void> {
    const taken = this.entries.splice(0);
    const byRegion = new Map<string, typeof taken>();
    for (const e of taken) byRegion.set(e.region, [...(byRegion.get(e.region) ?? []), e]);
    const calls: Promise<void>[] = [];
    for (const [region, list] of byRegion) {
      let call: typeof taken = [];
      let bytes = 0;
      for (const e of list) {
        const size = entryBytes(e.entry);
        if (size > PUT_EVENTS_MAX_BYTES) {
          e.resolve({ ok: false, error: 'eventbridge_entry_too_large' });
          continue;
        }
        if (call.length && (call.length === PUT_EVENTS_MAX_ENTRIES || bytes + size > PUT_EVENTS_MAX_BYTES)) {
          calls.push(this.send(region, call));
          [call, bytes] = [[], 0];
        }
        call.push(e);
        bytes += size;
      }
      if (call.length) calls.push(this.send(region, call));
    }
    await Promise.all(calls);
  }

  private async send(region: string, call: { entry: BusEntry; resolve: (o: BusOutcome) => void }[]): Promise<void> {
    let results: BusEntryResult[];
    try {
      results = await this.sender.putEvents(region, call.map((c) => c.entry));
    } catch (error) {
      const code = (error as { name?: unknown })?.name;
      for (const c of call) c.resolve({ ok: false, error: busError(code) });
      return;
    }
    call.forEach((c, i) => {
      const r = results[i];
      c.resolve(r?.ok ? { ok: true } : { ok: false, error: busError(r ? r.code : 'NoResult') });
    });
  }
}

/**
 * One attempt of an eventbridge subscription's delivery: the bus is checked against the allow-list
 * again (an operator may have revoked it), then the entry goes with the consumer batch's PutEvents
 * call (`slot`), or alone.
 */
export async function putOnBus(
  engine: Engine,
  subscription: { organization_id?: string; delivery: { event_bus_arn?: string; detail_type?: string } },
  event: KvItem,
  options: { eventBus?: EventBusSender; busSlot?: BusSlot },
): Promise<BusOutcome> {
  const arn = subscription.delivery.event_bus_arn ?? '';
  const allowed = subscription.organization_id !== undefined && (await eventBusAllowed(engine, subscription.organization_id, arn));
  const slot = options.busSlot ?? (options.eventBus ? new PutEventsBatch(options.eventBus).slot() : undefined);
  if (!allowed || !options.eventBus) {
    slot?.leave();
    return { ok: false, error: allowed ? 'eventbridge_unavailable' : 'eventbridge_bus_not_allowed' };
  }
  return slot!.put(busEntryOf({ event_bus_arn: arn, detail_type: subscription.delivery.detail_type }, event));
}
