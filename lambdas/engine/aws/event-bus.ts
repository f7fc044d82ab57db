/**
 * The event-bus port over EventBridge's PutEvents: one client per region (a bus's ARN names its
 * region), built at the first call. `AWS_ENDPOINT_URL` (the awsEndpointUrl setting) points it at an
 * EventBridge-compatible endpoint, which is how the local server delivers. The SDK does not retry:
 * a failed call or entry takes the delivery's own retry ladder (lambdas/events/delivery.ts).
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import type { BusEntry, BusEntryResult, EventBusSender } from '../event-bus.js';
import { settings } from '../../shared/settings.js';

/** Spec 8's 10 s per delivery attempt, for the whole call. */
const REQUEST_TIMEOUT_MS = 10_000;

export class AwsEventBusSender implements EventBusSender {
  private readonly clients = new Map<string, EventBridgeClient>();

  constructor(private readonly endpoint: string | undefined = settings().awsEndpointUrl) {}

  private client(region: string): EventBridgeClient {
    let client = this.clients.get(region);
    if (!client) {
      client = new EventBridgeClient({ region, maxAttempts: 1, requestHandler: { requestTimeout: REQUEST_TIMEOUT_MS }, ...(this.endpoint ? { endpoint: this.endpoint } : {}) });
      this.clients.set(region, client);
    }
    return client;
  }

  async putEvents(region: string, entries: BusEntry[]): Promise<BusEntryResult[]> {
    const answer = await this.client(region).send(
      new PutEventsCommand({
        Entries: entries.map((e) => ({ EventBusName: e.eventBusArn, Source: e.source, DetailType: e.detailType, Detail: e.detail, Time: e.time })),
      }),
    );
    // Entries answer in the order sent; an entry without an EventId failed with its ErrorCode.
    return entries.map((_, i) => {
      const result = answer.Entries?.[i];
      if (result?.EventId && !result.ErrorCode) return { ok: true };
      return { ok: false, code: result?.ErrorCode || 'NoResult' };
    });
  }
}
