/**
 * The bare floor of a function's start (bench/lambda-init.ts): one DynamoDB document client, built at
 * import as a typical hand-written handler does, and a handler that reads one item.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';

const documents = DynamoDBDocumentClient.from(new DynamoDBClient({}));

export async function handler(event: { key: string }): Promise<unknown> {
  const { Item } = await documents.send(new GetCommand({ TableName: process.env.TABLE_NAME, Key: { pk: event.key, sk: event.key } }));
  return Item ?? null;
}
