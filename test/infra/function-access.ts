/**
 * What a scheduled function's adapters send, as IAM authorizes it: the requests turned into
 * (action, partition key) pairs and the grants' LeadingKeys patterns, so a test checks every request
 * against the synthesized role. Shared by the sweeps' infra tests.
 */
import { BatchGetCommand, DeleteCommand, GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import type { AllowStatement } from './helpers.js';

export type Access = { action: string; on: string };

/** An engine port the function is not configured or granted for: any use fails the test loudly. */
export const unusedPort = (port: string): object =>
  new Proxy({}, {
    get: (_t, p) => {
      if (p === 'then' || typeof p === 'symbol') return undefined;
      throw new Error(`the sweep used engine.${port}.${String(p)}, which the function is not configured or granted for`);
    },
  });

const PK = TABLE_SCHEMA.partitionKey;

/** What IAM authorizes per DynamoDB request: a transaction's writes each as their own action. */
export function dynamoAccesses(command: unknown): Access[] {
  if (command instanceof GetCommand) return [{ action: 'dynamodb:GetItem', on: String(command.input.Key?.[PK]) }];
  if (command instanceof DeleteCommand) return [{ action: 'dynamodb:DeleteItem', on: String(command.input.Key?.[PK]) }];
  if (command instanceof UpdateCommand) return [{ action: 'dynamodb:UpdateItem', on: String(command.input.Key?.[PK]) }];
  if (command instanceof PutCommand) return [{ action: 'dynamodb:PutItem', on: String(command.input.Item?.[PK]) }];
  // Each key of a batch is authorized as its own read.
  if (command instanceof BatchGetCommand) return Object.values(command.input.RequestItems ?? {}).flatMap((r) => (r.Keys ?? []).map((k) => ({ action: 'dynamodb:BatchGetItem', on: String(k[PK]) })));
  if (command instanceof TransactWriteCommand) {
    return (command.input.TransactItems ?? []).map((w) => {
      if (w.Delete) return { action: 'dynamodb:DeleteItem', on: String(w.Delete.Key?.[PK]) };
      if (w.Put) return { action: 'dynamodb:PutItem', on: String(w.Put.Item?.[PK]) };
      if (w.Update) return { action: 'dynamodb:UpdateItem', on: String(w.Update.Key?.[PK]) };
      return { action: 'dynamodb:ConditionCheckItem', on: String(w.ConditionCheck?.Key?.[PK]) };
    });
  }
  if (command instanceof QueryCommand) {
    const { IndexName, KeyConditionExpression, ExpressionAttributeNames, ExpressionAttributeValues } = command.input;
    if (IndexName) throw new Error(`the sweep queried index ${IndexName}`);
    const m = /^(#\w+) = (:\w+)/.exec(KeyConditionExpression ?? '');
    if (!m || ExpressionAttributeNames?.[m[1]] !== PK) throw new Error(`unexpected key condition ${KeyConditionExpression}`);
    return [{ action: 'dynamodb:Query', on: String(ExpressionAttributeValues?.[m[2]]) }];
  }
  throw new Error(`unexpected DynamoDB request ${(command as object).constructor.name}`);
}

/** The table's LeadingKeys patterns over the statements allowing `action` on it. */
export function grantedLeadingKeys(statements: AllowStatement[], tableArn: string, action: string): string[] {
  return statements
    .filter((s) => s.actions.includes(action) && s.resources === tableArn)
    .flatMap((s) => {
      const keys = s.condition?.['ForAllValues:StringLike']?.['dynamodb:LeadingKeys'];
      if (!Array.isArray(keys)) throw new Error(`${action} is granted without a dynamodb:LeadingKeys condition`);
      return keys as string[];
    });
}
