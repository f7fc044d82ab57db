import { Stack } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Rule } from 'aws-cdk-lib/aws-events';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction, grantItems, schedule } from './function-defaults.js';

/**
 * What the collections sweep may do, by action, to which partition keys (lambdas/knowledge/collection-keys.ts;
 * test/infra/collections-sweep.test.ts checks each is used): it reads its due entries, and removes an
 * expired collection's item with its entry (one transaction). Nothing else of the table.
 */
export const COLLECTIONS_SWEEP_KEYS: Readonly<Record<string, readonly string[]>> = {
  /** The due entries (kcolsweep). */
  'dynamodb:Query': ['kcolsweep'],
  /** An expired collection's item and its sweep entry. */
  'dynamodb:DeleteItem': ['kcol#*', 'kcolsweep'],
};

/** Every 5 minutes (collections end on a scale of hours); a run stops starting batches after 30 s (COLLECTIONS_SWEEP). */
export const COLLECTIONS_SWEEP_RUN = { timeoutSeconds: 60, everyMinutes: 5 } as const;

/**
 * The knowledge collections' sweep on a schedule (docs/decisions/knowledge-collections.md): removes
 * what expired even when no collection is created. A failed run is not retried: the next one takes the
 * same due entries. Its errors alarm comes with every function's (lib/operations.ts).
 */
export class CollectionsSweep extends Construct {
  readonly fn: NodejsFunction;
  readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: { table: Table }) {
    super(scope, id);
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/collections-sweep',
      name: 'collections-sweep',
      tag: 'collections-sweep',
      description: 'knowledge: removes the data of expired collections (every 5 minutes)',
      timeoutSeconds: COLLECTIONS_SWEEP_RUN.timeoutSeconds,
      retryAttempts: 0,
      environment: { [ENV.tableName]: props.table.tableName },
    });
    this.fn = fn;
    for (const [action, keys] of Object.entries(COLLECTIONS_SWEEP_KEYS)) grantItems(role, props.table, [action], [...keys]);
    this.schedule = schedule(this, fn, COLLECTIONS_SWEEP_RUN.everyMinutes, `${Stack.of(this).stackName}: runs the knowledge collections sweep`);
  }
}
