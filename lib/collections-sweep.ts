import { Stack } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Rule } from 'aws-cdk-lib/aws-events';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction, grantItems, schedule } from './function-defaults.js';
import { grantBlobPrefixes, KNOWLEDGE_BLOB_PREFIXES } from './knowledge-items.js';
import { acknowledgeVectorIndexes } from './nag.js';
import type { Queues } from './queues.js';
import type { VectorBucket } from './vector-bucket.js';

/**
 * What the collections sweep may do, by action, to which partition keys (lambdas/knowledge/collection-keys.ts;
 * test/infra/collections-sweep.test.ts checks each is used). Expired collections: it reads its due
 * entries, removes each collection's items with their local_vectors marks and processing entries, then
 * the collection's item with its entry. Lost processing: it reads the due processing entries and the
 * items they name, and moves each entry to its next due time on the item. The index sweep's keys are
 * apart (COLLECTIONS_SWEEP_INDEX_KEYS). Nothing else of the table.
 */
export const COLLECTIONS_SWEEP_KEYS: Readonly<Record<string, readonly string[]>> = {
  /** The due entries (kcolsweep, kproc); an expired collection's items (kitem#) and a package's marks (kvec#). */
  'dynamodb:Query': ['kcolsweep', 'kproc', 'kitem#*', 'kvec#*'],
  /** The item a processing entry names. */
  'dynamodb:GetItem': ['kitem#*'],
  /** A processing entry's new due time, on its item. */
  'dynamodb:UpdateItem': ['kitem#*'],
  /** A processing entry at its new due time. */
  'dynamodb:PutItem': ['kproc'],
  /** An expired collection's item, its items, their marks and processing entries, and its sweep entry; a processing entry moved or of an item gone. */
  'dynamodb:DeleteItem': ['kcol#*', 'kcolsweep', 'kitem#*', 'kvec#*', 'kproc'],
};

/**
 * The index sweep's (lambdas/knowledge/index-sweep.ts): its registry of workspace indexes and its turn,
 * the workspace's vector database (is the index still its own), and the items its listed entries name.
 */
export const COLLECTIONS_SWEEP_INDEX_KEYS: Readonly<Record<string, readonly string[]>> = {
  /** The organizations in turn, and an organization's indexes. */
  'dynamodb:Query': ['kidxorg', 'kidx#*'],
  /** The turn; a workspace's vector database (`ws#<workspace>` / `vector-db`). */
  'dynamodb:GetItem': ['kidxturn', 'ws#*'],
  /** The items a page of entries names. */
  'dynamodb:BatchGetItem': ['kitem#*'],
  /** An organization's place among its indexes; an index's cursor and next pass. */
  'dynamodb:UpdateItem': ['kidxorg', 'kidx#*'],
  /** Where the turn stopped. */
  'dynamodb:PutItem': ['kidxturn'],
  /** An organization without indexes; an index whose database is gone. */
  'dynamodb:DeleteItem': ['kidxorg', 'kidx#*'],
};

/** Its objects: an expired collection's packages read (which vectors to delete) and deleted, with its inline texts. */
export const COLLECTIONS_SWEEP_OBJECTS = {
  's3:GetObject': [KNOWLEDGE_BLOB_PREFIXES.collections],
  's3:DeleteObject': [KNOWLEDGE_BLOB_PREFIXES.collections],
} as const;

/**
 * A package's vectors deleted by key; a local_vectors collection's own index removed; an index's
 * entries listed with their metadata (ListVectors with GetVectors) for the index sweep. No index is
 * made, written or queried.
 */
export const COLLECTIONS_SWEEP_VECTOR_ACTIONS = ['s3vectors:DeleteVectors', 's3vectors:DeleteIndex', 's3vectors:ListVectors', 's3vectors:GetVectors'] as const;

/** Every 5 minutes (collections end on a scale of hours); a run stops starting batches after 30 s (COLLECTIONS_SWEEP). */
export const COLLECTIONS_SWEEP_RUN = { timeoutSeconds: 60, everyMinutes: 5 } as const;

export interface CollectionsSweepProps {
  readonly table: Table;
  readonly bucket: Bucket;
  readonly queues: Queues;
  readonly vectors: VectorBucket;
}

/**
 * The knowledge collections' sweep on a schedule (docs/decisions/knowledge-collections.md): removes
 * what expired even when no collection is created, and sends again the items whose processing was lost
 * (to `knowledge` only). A failed run is not retried: the next one takes the same due entries. Its
 * errors alarm comes with every function's (lib/operations.ts).
 */
export class CollectionsSweep extends Construct {
  readonly fn: NodejsFunction;
  readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: CollectionsSweepProps) {
    super(scope, id);
    const { queue } = props.queues.byName.knowledge;
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/collections-sweep',
      name: 'collections-sweep',
      tag: 'collections-sweep',
      description: 'knowledge: removes the data of expired collections, sends lost items again, removes index entries no item serves (every 5 minutes)',
      timeoutSeconds: COLLECTIONS_SWEEP_RUN.timeoutSeconds,
      retryAttempts: 0,
      environment: {
        [ENV.tableName]: props.table.tableName,
        [ENV.bucketName]: props.bucket.bucketName,
        [ENV.vectorBucketName]: props.vectors.bucketName,
        [ENV.queueUrls]: Stack.of(this).toJsonString({ knowledge: queue.queueUrl }),
      },
    });
    this.fn = fn;
    for (const [action, keys] of Object.entries(COLLECTIONS_SWEEP_KEYS)) grantItems(role, props.table, [action], [...keys]);
    for (const [action, keys] of Object.entries(COLLECTIONS_SWEEP_INDEX_KEYS)) grantItems(role, props.table, [action], [...keys]);
    grantBlobPrefixes(role, props.bucket, COLLECTIONS_SWEEP_OBJECTS);
    role.addToPrincipalPolicy(new PolicyStatement({ actions: [...COLLECTIONS_SWEEP_VECTOR_ACTIONS], resources: [props.vectors.indexArns] }));
    acknowledgeVectorIndexes(this, props.vectors.indexArns);
    queue.grantSendMessages(role);
    this.schedule = schedule(this, fn, COLLECTIONS_SWEEP_RUN.everyMinutes, `${Stack.of(this).stackName}: runs the knowledge collections sweep`);
  }
}
