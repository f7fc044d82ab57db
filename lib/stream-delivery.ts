import { Stack } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction, grantItems, sqsSource } from './function-defaults.js';
import type { Queues } from './queues.js';
import type { ConnectionsTarget } from './route-function.js';
import { acknowledgeConnectionArns, acknowledgeTableIndexes } from './nag.js';
import type { ServerSecret } from './server-secret.js';
import type { SigningKey } from './signing.js';

/**
 * Partition key prefixes the stream consumer touches (lambdas/events/stream-slots.ts and inbox.ts);
 * test/infra/stream-delivery.test.ts checks them against the domain's key functions.
 */
/** Inbox messages: leased (query, conditional update). */
export const STREAM_INBOX_KEYS = ['inbox#*'];
/** Stream slots: the subscription's open sockets are listed; a gone socket's slots are deleted. */
export const STREAM_SLOT_KEYS = ['evstream#*'];

export const STREAM_CONSUMER = {
  /** A wake sends at most 100 frames to each of at most 5 sockets. */
  timeoutSeconds: 30,
  batchSize: 10,
  maxBatchingWindowSeconds: 0,
  maxConcurrency: 10,
} as const;

export interface StreamDeliveryProps {
  readonly table: Table;
  readonly queues: Queues;
  readonly connections: ConnectionsTarget;
  /** Opens each connection's sealed credential (lambdas/events/stream-credential.ts). */
  readonly secret: ServerSecret;
  /** Verifies an OAuth token a stream was opened with. */
  readonly signing: SigningKey;
}

/**
 * What checking an open stream's credential reads (lambdas/auth: a secret key by its hash, an OAuth
 * client, a publishable key and the origins it lists, the organization, workspace and application),
 * GetItem on the first and Query on `origin#` only: the same resolver the handshake ran.
 */
export const STREAM_CREDENTIAL_KEYS = ['key#*', 'keyid#*', 'oauthclient#*', 'pbkey#*', 'org#*', 'ws#*', 'app#*'];
export const STREAM_ORIGIN_KEYS = ['origin#*'];

/**
 * The consumer of the `streams` queue: wakes of WebSocket streams whose sockets API
 * Gateway holds (lambdas/events/stream-remote.ts). It leases inbox messages, posts them to the
 * subscription's connections and queues the wake at the end of their lease; nothing more.
 */
export class StreamDelivery extends Construct {
  readonly deliveryFunction: NodejsFunction;

  constructor(scope: Construct, id: string, props: StreamDeliveryProps) {
    super(scope, id);
    const { queue } = props.queues.byName.streams;
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/streams',
      name: 'streams-delivery',
      tag: 'streams',
      description: 'events: sends WebSocket stream frames when a streams queue message wakes a subscription',
      timeoutSeconds: STREAM_CONSUMER.timeoutSeconds,
      environment: {
        [ENV.tableName]: props.table.tableName,
        [ENV.queueUrls]: Stack.of(this).toJsonString({ streams: queue.queueUrl }),
        [ENV.connectionsEndpoint]: props.connections.endpoint,
        [ENV.connectionsTable]: props.connections.table.tableName,
        [ENV.serverSecretArn]: props.secret.secret.secretArn,
        [ENV.signingKeyIds]: props.signing.keyIdsJson(),
      },
    });
    this.deliveryFunction = fn;
    fn.addEventSource(sqsSource(queue, STREAM_CONSUMER));
    grantItems(role, props.table, ['dynamodb:Query', 'dynamodb:UpdateItem'], STREAM_INBOX_KEYS);
    // A pull reads the inbox's waiting and leased indexes (gsi1, gsi2: keys inbox#w#<sub>, inbox#l#<sub>).
    role.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['dynamodb:Query'], resources: [`${props.table.tableArn}/index/*`], conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': STREAM_INBOX_KEYS } } }),
    );
    acknowledgeTableIndexes(role, props.table.tableArn);
    grantItems(role, props.table, ['dynamodb:Query', 'dynamodb:DeleteItem'], STREAM_SLOT_KEYS);
    // Reads a connection's record; forgets one found gone.
    props.connections.table.grant(role, 'dynamodb:GetItem', 'dynamodb:DeleteItem');
    // Posts frames, and closes a connection whose credential no longer holds (docs/events/stream.md).
    role.addToPrincipalPolicy(new PolicyStatement({ actions: ['execute-api:ManageConnections'], resources: [...props.connections.manageArns] }));
    acknowledgeConnectionArns(this, props.connections.manageArns);
    // Checks each connection's credential before it posts: opens it (the server secret), resolves it.
    props.secret.grantRead(role);
    props.signing.grantVerify(role);
    grantItems(role, props.table, ['dynamodb:GetItem'], STREAM_CREDENTIAL_KEYS);
    grantItems(role, props.table, ['dynamodb:Query'], STREAM_ORIGIN_KEYS);
    // The wake at the end of a lease.
    queue.grantSendMessages(role);
  }
}
