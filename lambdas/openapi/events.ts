/** The Events API's routes (spec 4.21), and the EventBridge delivery mode beside them (docs/events/eventbridge.md). */
import * as z from 'zod/mini';
import { WORKSPACE_ID_PATTERN } from '../auth/workspace-access.js';
import { EVENT_ID_PATTERN, publishBodySchema } from '../events/envelope.js';
import { publishAnswerSchema } from '../events/publish.js';
import {
  newSubscriptionSchema,
  rotatedSecretSchema,
  rotateSecretBodySchema,
  SUBSCRIPTION_ID_DESCRIPTION,
  SUBSCRIPTION_ID_PATTERN,
  subscriptionBodySchema,
  subscriptionListSchema,
} from '../events/subscriptions.js';
import { ackAnswerSchema, ackBodySchema, pullAnswerSchema, pullBodySchema } from '../events/inbox.js';
import { streamQuerySchema } from '../events/stream-input.js';
import { deadListQuerySchema, deadListSchema, replayAnswerSchema } from '../events/dead-letters.js';
import { workspaceStatsSchema } from '../events/stats.js';
import { STREAM_SUBPROTOCOL } from '../http/websocket.js';
import type { OperationDoc, OperationDocs, ParameterDoc } from './operation.js';
import { OAUTH_TOKEN_DOC } from './oauth.js';

const WORKSPACE = 'ws_01jfq3z8m5x2k9v7t4r6n8p0ab';
const SUBSCRIPTION = 'sub_01jfq40a7c3d9e2f5g8h1j4k6m';
const EVENT = 'evt_01jfq4b2c3d4e5f6g7h8j9k0mn';
const TIME = '2026-12-01T10:00:00.000Z';
const ENVELOPE = {
  event_id: EVENT,
  type: 'order.paid',
  source: 'app_01jfq2w7x8y9z0a1b2c3d4e5f6',
  time: TIME,
  tenant: { organization_id: 'org_01jfq2v5w6x7y8z9a0b1c2d3e4', account_id: 'org_01jfq2v5w6x7y8z9a0b1c2d3e4', workspace_id: WORKSPACE, application_id: 'app_01jfq2w7x8y9z0a1b2c3d4e5f6' },
  idempotency_key: 'ord_1.paid',
  data: { order_id: 'ord_1', total: 12.5 },
};
const SECRET = 'whsec_3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';

const WORKSPACE_PARAM: ParameterDoc = {
  description: 'The workspace (`ws_` and 26 characters). An application credential names only its own; any other, or one that does not exist, is `403 forbidden`.',
  schema: () => z.string().check(z.regex(WORKSPACE_ID_PATTERN)),
  example: WORKSPACE,
};
const SUBSCRIPTION_PARAM: ParameterDoc = {
  description: `The subscription: ${SUBSCRIPTION_ID_DESCRIPTION} Another form is \`400 invalid_id\`; an unknown one \`404 subscription_not_found\`.`,
  schema: () => z.string().check(z.regex(SUBSCRIPTION_ID_PATTERN)),
  example: SUBSCRIPTION,
};
const EVENT_PARAM: ParameterDoc = {
  description: 'The dead event (`evt_` and 26 characters); anything else, or an event that is no dead letter, is `404 dead_event_not_found`.',
  schema: () => z.string().check(z.regex(EVENT_ID_PATTERN)),
  example: EVENT,
};
const SUBSCRIPTION_PATH = { workspace_id: WORKSPACE_PARAM, subscription_id: SUBSCRIPTION_PARAM };

/** Routes that take no fields: no body, `{}` or `null` (the parser reads none as `{}`). */
const orNull = (schema: () => z.core.$ZodType) => () => z.nullable(schema() as z.ZodMiniType);

const STREAM_DOC: OperationDoc = {
  tag: 'Streams',
  summary: 'Open a WebSocket stream of a subscription',
  description: [
    `A WebSocket upgrade (\`Upgrade: websocket\`, \`Sec-WebSocket-Version: 13\`) offering the subprotocol \`${STREAM_SUBPROTOCOL}\`. A server sends its secret key or OAuth token in \`Authorization\` (and no \`Origin\`); a browser, which cannot set headers on a WebSocket, offers its publishable key as a second subprotocol \`bearer.<key>\` from an origin the key lists. The server answers \`101\` with \`${STREAM_SUBPROTOCOL}\` only (a \`bearer.\` subprotocol is never echoed). A secret key or OAuth token with a \`bearer.\` subprotocol offered is \`403 secret_key_in_browser\`. Without an upgrade, or without \`${STREAM_SUBPROTOCOL}\`: \`426 upgrade_required\`. Works on \`pull\` and \`websocket\` subscriptions (they share the inbox, leases and acks of pull and ack); other modes are \`409 wrong_delivery_mode\`. At most 5 open sockets per subscription and 100 per workspace (\`429 too_many_streams\`). Every refusal is an HTTP answer with the JSON error shape before the upgrade.`,
    '',
    '**Server frames:** one text frame per message, the Event envelope with `delivery_count` (1 the first time), as pull returns it without `lease_id`: `{"event_id": "evt_…", "type", "source", "time", "tenant", "idempotency_key", "data", "delivery_count": 1}`. Messages are leased oldest first for `lease_seconds`; at most 100 unacknowledged per socket. An unacknowledged frame comes again after its lease (on this socket, another, or to a puller) with `delivery_count` one higher: deduplicate by `event_id`.',
    '',
    '**Client frames:** text `{"ack": ["evt_…", …]}`, 1 to 100 event ids, at most 49,152 bytes. Nothing is sent back for an ack.',
    '',
    '**Close codes:** 1000 client closed; 1001 server shutting down or slot lost (reconnect); 1003 a binary frame; 1008 a malformed client frame (the reason names `invalid_body`, `unknown_field` or `invalid_id`); 1009 a client frame over 49,152 bytes; 1011 the store failed (reconnect); 4401 the credential no longer resolves (`invalid_credentials`: get a new one, then reconnect); 4403 the credential may no longer open it (`key_disabled`, `organization_disabled`, `origin_not_allowed`, `forbidden`: do not reconnect with it). The server pings every 30 s.',
  ].join('\n'),
  path: SUBSCRIPTION_PATH,
  query: streamQuerySchema,
  headers: {
    'Sec-WebSocket-Protocol': {
      description: `The subprotocols offered, comma-separated: \`${STREAM_SUBPROTOCOL}\` (required), and from a browser \`bearer.<publishable key>\` (its credential; an \`Authorization\` header wins when both are sent).`,
      required: true,
      schema: () => z.string().check(z.regex(/(?:^|,)\s*service\.v1\s*(?:,|$)/)),
    },
    Upgrade: { description: '`websocket`.', required: true },
    Connection: { description: '`Upgrade`.', required: true },
    'Sec-WebSocket-Key': { description: 'The handshake nonce (RFC 6455): 16 random bytes in Base64.', required: true },
    'Sec-WebSocket-Version': { description: '`13`.', required: true },
    Origin: { description: "A browser's origin: one the publishable key lists, else `403 origin_not_allowed`. A server credential with an `Origin` is `403 secret_key_in_browser`." },
  },
  responses: {
    101: {
      description: 'Switching Protocols: the socket is open; frames as described above.',
      headers: {
        Upgrade: { description: '`websocket`.', required: true },
        Connection: { description: '`Upgrade`.', required: true },
        'Sec-WebSocket-Accept': { description: 'The handshake answer (RFC 6455).', required: true },
        'Sec-WebSocket-Protocol': { description: `\`${STREAM_SUBPROTOCOL}\`.`, required: true, schema: () => z.literal(STREAM_SUBPROTOCOL) },
      },
    },
  },
  errors: ['upgrade_required', 'invalid_query', 'invalid_limit', 'invalid_id', 'subscription_not_found', 'wrong_delivery_mode', 'too_many_streams'],
};

export const EVENTS_OPERATIONS: OperationDocs = {
  'events.oauth.token': OAUTH_TOKEN_DOC,
  'events.events.publish': {
    tag: 'Events',
    summary: 'Publish events',
    description:
      "`{\"event\": {...}}` or `{\"events\": [...]}` with 1 to 100 events; anything else, 0 or over 100 events, or `source` anywhere in the body (the service sets it from the credential) is the whole call's `400 invalid_body`. An event: `type` (required; dotted lowercase words, at most 128 bytes), `data` (required, any JSON value; at most 16 KiB, 32 KiB for `advanced`; nesting at most 128), `idempotency_key` (optional, 1 to 256 printable ASCII characters), `tier` (`basic` default, `reliable`, `advanced`). Each event is checked on its own: a bad one is listed in `rejected` with its code and never blocks the others. An `idempotency_key` already used in the workspace within 168 hours answers the original `event_id` with `duplicate: true` and delivers nothing new. Each accepted event is delivered, at least once, to every subscription whose patterns match its type.",
    path: { workspace_id: WORKSPACE_PARAM },
    body: {
      name: 'PublishRequest',
      schema: publishBodySchema,
      description: 'One event, or 1 to 100. The items are checked one by one (a bad one is rejected in the answer, not the call), so the schema leaves them open; each is `{type, data, idempotency_key?, tier?}`.',
      example: { events: [{ type: 'order.paid', data: { order_id: 'ord_1', total: 12.5 }, idempotency_key: 'ord_1.paid' }, { type: 'Order Paid', data: {} }] },
    },
    responses: {
      202: {
        description: 'Accepted: the events accepted, in the order sent, and each rejected one with its index and code.',
        name: 'PublishResult',
        schema: publishAnswerSchema,
        example: { accepted: [{ event_id: EVENT, duplicate: false }], rejected: [{ index: 1, code: 'invalid_type' }] },
      },
    },
    errors: [],
  },
  'events.subscriptions.list': {
    tag: 'Subscriptions',
    summary: 'List subscriptions',
    description: 'Every subscription of the workspace, oldest first, never with a secret. No query: any parameter is `400 invalid_query`.',
    path: { workspace_id: WORKSPACE_PARAM },
    responses: {
      200: {
        description: 'The subscriptions.',
        name: 'SubscriptionList',
        schema: subscriptionListSchema,
        example: {
          subscriptions: [
            { subscription_id: SUBSCRIPTION, types: ['order.*'], delivery: { mode: 'pull' }, created_at: TIME },
            { subscription_id: 'sub_01jfq40a7c3d9e2f5g8h1j4k6n', types: ['*'], delivery: { mode: 'webhook', url: 'https://example.com/webhooks', secret_ref: 'managed' }, created_at: TIME },
          ],
        },
      },
    },
    errors: ['invalid_query'],
  },
  'events.subscriptions.create': {
    tag: 'Subscriptions',
    summary: 'Create a subscription',
    description:
      "`types`: 1 to 20 patterns (`*`, a type, or a prefix ending in `.*`: `order.*` matches `order.paid` and `order.item.added`), else `400 invalid_subscription`. `delivery`: `{mode: \"webhook\", url}`, `{mode: \"pull\"}`, `{mode: \"websocket\"}`, or the extension `{mode: \"eventbridge\", event_bus_arn, detail_type?}` (the bus must be on the organization's allow-list; docs/events/eventbridge.md), else `400 invalid_delivery`. A webhook URL is public https on port 443, with no credentials and no fragment; private, loopback, link-local and local-use hosts are refused here (`url_destination_blocked`) and again at each delivery; a host that does not resolve is `invalid_url`; redirects are never followed. At most 50 subscriptions per workspace (`409 too_many_subscriptions`). A webhook subscription's answer carries its `signing_secret`, shown this once; its deliveries are signed with it (`x-event-signature: v1=<hex>`).",
    path: { workspace_id: WORKSPACE_PARAM },
    body: {
      name: 'SubscriptionRequest',
      schema: subscriptionBodySchema,
      example: { types: ['order.*'], delivery: { mode: 'webhook', url: 'https://example.com/webhooks' } },
    },
    responses: {
      201: {
        description: 'Created: the Subscription, with `signing_secret` for a webhook (shown once).',
        name: 'NewSubscription',
        schema: newSubscriptionSchema,
        example: { subscription_id: SUBSCRIPTION, types: ['order.*'], delivery: { mode: 'webhook', url: 'https://example.com/webhooks', secret_ref: 'managed' }, created_at: TIME, signing_secret: SECRET },
      },
    },
    errors: ['unknown_field', 'invalid_subscription', 'invalid_delivery', 'invalid_url', 'url_not_https', 'url_has_credentials', 'url_port_not_allowed', 'url_destination_blocked', 'too_many_subscriptions'],
  },
  'events.subscriptions.delete': {
    tag: 'Subscriptions',
    summary: 'Delete a subscription',
    description: 'Its waiting messages are removed first, then the subscription: a delete cut short leaves it with fewer messages, and a retried DELETE finishes it.',
    path: SUBSCRIPTION_PATH,
    responses: { 204: { description: 'Deleted.' } },
    errors: ['invalid_id', 'subscription_not_found'],
  },
  'events.subscriptions.rotate-secret': {
    tag: 'Subscriptions',
    summary: "Rotate a webhook subscription's signing secret",
    description:
      'Webhook subscriptions only (`409 wrong_delivery_mode` otherwise). The new secret signs from now on; every previous secret still live keeps signing until `previous_valid_until` (24 hours on), so a delivery carries one `v1=` signature per live secret, newest first. Rotating again inside the window keeps every unexpired secret. No fields: send no body, `{}` or `null`; any field is `400 unknown_field`.',
    path: SUBSCRIPTION_PATH,
    body: { schema: orNull(rotateSecretBodySchema), required: false, example: {} },
    responses: {
      200: {
        description: 'The new secret, shown this once.',
        name: 'RotatedSecret',
        schema: rotatedSecretSchema,
        example: { subscription_id: SUBSCRIPTION, signing_secret: SECRET, previous_valid_until: '2026-12-02T10:00:00.000Z' },
      },
    },
    errors: ['unknown_field', 'invalid_id', 'subscription_not_found', 'wrong_delivery_mode'],
  },
  'events.subscriptions.pull': {
    tag: 'Inbox',
    summary: 'Lease messages',
    description:
      'Leases up to `max` visible messages of a pull or websocket subscription (`409 wrong_delivery_mode` otherwise), oldest first, for `lease_seconds`: each is hidden until its lease ends, then visible again unless acknowledged, and `delivery_count` counts its leases. `max` 1 to 100 (default 10), `lease_seconds` 5 to 300 (default 30), else `400 invalid_limit`; no body, `{}` or `null` takes the defaults.',
    path: SUBSCRIPTION_PATH,
    body: { name: 'PullRequest', schema: orNull(pullBodySchema), required: false, example: { max: 10, lease_seconds: 30 } },
    responses: {
      200: {
        description: 'The messages leased (none: nothing is visible).',
        name: 'PullResult',
        schema: pullAnswerSchema,
        example: { messages: [{ ...ENVELOPE, delivery_count: 1, lease_id: `${EVENT}.1` }] },
      },
    },
    errors: ['unknown_field', 'invalid_limit', 'invalid_id', 'subscription_not_found', 'wrong_delivery_mode'],
  },
  'events.subscriptions.ack': {
    tag: 'Inbox',
    summary: 'Acknowledge messages',
    description:
      "Removes the named messages of this subscription's inbox, each only while a lease on it holds (spec 3: acknowledged before the lease ends); given a `lease_id`, only under that lease. `ids`: 1 to 100, each an event id or a `lease_id`, else `400 invalid_id` (not an array of 1 to 100: `400 invalid_body`). Every id that removed nothing is in `not_acked` with its reason.",
    path: SUBSCRIPTION_PATH,
    body: { name: 'AckRequest', schema: ackBodySchema, example: { ids: [EVENT] } },
    responses: {
      200: {
        description: 'How many were removed, and why the others were not.',
        name: 'AckResult',
        schema: ackAnswerSchema,
        example: { acked: 1, not_acked: [{ id: 'evt_01jfq4b2c3d4e5f6g7h8j9k0mp', reason: 'lease_expired' }] },
      },
    },
    errors: ['unknown_field', 'invalid_id', 'subscription_not_found', 'wrong_delivery_mode'],
  },
  'events.subscriptions.stream': STREAM_DOC,
  'events.dead.list': {
    tag: 'Dead letters',
    summary: 'List dead letters',
    description: 'Events whose webhook (or event bus) delivery failed 5 times, kept 30 days, newest first. Only the query `limit` (1 to 100, default 20); anything else is `400 invalid_query`.',
    path: { workspace_id: WORKSPACE_PARAM },
    query: deadListQuerySchema,
    responses: {
      200: {
        description: 'The dead letters.',
        name: 'DeadLetterList',
        schema: deadListSchema,
        example: { dead: [{ event: ENVELOPE, attempts: 5, dead_at: '2026-12-01T10:02:30.000Z', replay_count: 0, last_error: 'webhook_status_500' }] },
      },
    },
    errors: ['invalid_query'],
  },
  'events.dead.replay': {
    tag: 'Dead letters',
    summary: 'Replay a dead letter',
    description:
      'Queues the same event (same `event_id`) again to every subscription of the letter that still exists, whose delivery died and that never received it, with no replay pending; counts `replay_count`. With nothing left to queue the answer is still 202, with `queued: []` and `replayed: false`. A replay that dies again can be replayed again.',
    path: { workspace_id: WORKSPACE_PARAM, event_id: EVENT_PARAM },
    responses: {
      202: {
        description: 'Accepted: the subscriptions it was queued to.',
        name: 'ReplayResult',
        schema: replayAnswerSchema,
        example: { event_id: EVENT, replayed: true, queued: [SUBSCRIPTION] },
      },
    },
    errors: ['dead_event_not_found'],
  },
  'events.stats.get': {
    tag: 'Statistics',
    summary: 'Workspace statistics',
    description: "The workspace's delivery counters, exact (each moves in the transaction of the change it counts). No query: any parameter is `400 invalid_query`.",
    path: { workspace_id: WORKSPACE_PARAM },
    responses: {
      200: {
        description: 'The statistics.',
        name: 'WorkspaceStats',
        schema: workspaceStatsSchema,
        example: { workspace_id: WORKSPACE, published: 120, completed: 115, depth: 4, oldest_pending_age_seconds: 12, retries: 3, retry_rate: 0.025, dlq_inflow: 1 },
      },
    },
    errors: ['invalid_query'],
  },
};
