/**
 * dynalite behind an endpoint that also answers TransactWriteItems: DynamoDB as another process
 * reaches it by AWS_ENDPOINT_URL_DYNAMODB (`ENGINE=aws npm start` in a child). Every request is
 * passed on to dynalite as it came, except TransactWriteItems, which the emulation of
 * dynalite-transactions.ts runs from the request as DynamoDB receives it, answering as DynamoDB does.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBDocumentClient, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynaliteTable } from './dynalite.js';
import { emulateTransactions, type TransactionEmulation } from './dynalite-transactions.js';

export interface TransactingEndpoint {
  endpoint: string;
  /** The emulation, installed in this process (its stats count the transactions that came in). */
  emulation: TransactionEmulation;
  /** TransactWriteItems requests that came in over HTTP. */
  received: { transactions: number };
  close(): Promise<void>;
}

/** A TransactWriteItems request body run by the emulation (through `documents`); the answer as DynamoDB gives it. */
export function transactFromWire(documents: DynamoDBDocumentClient): (body: Buffer) => Promise<{ status: number; answer: object }> {
  return async (body) => {
    const input = JSON.parse(body.toString('utf8')) as { TransactItems: Record<string, Record<string, any>>[] };
    const TransactItems = input.TransactItems.map((action) =>
      Object.fromEntries(
        Object.entries(action).map(([kind, a]) => {
          const out: Record<string, unknown> = { ...a };
          // Numbers kept as their text: a value past 2^53 or 1e21 must be written back as it came.
          for (const field of ['Item', 'Key', 'ExpressionAttributeValues']) if (a[field]) out[field] = unmarshall(a[field], { wrapNumbers: true });
          return [kind, out];
        }),
      ),
    );
    try {
      await documents.send(new TransactWriteCommand({ TransactItems } as never));
      return { status: 200, answer: {} };
    } catch (error) {
      const e = error as { name: string; message: string; CancellationReasons?: unknown };
      return { status: 400, answer: { __type: `com.amazonaws.dynamodb.v20120810#${e.name}`, message: e.message, CancellationReasons: e.CancellationReasons } };
    }
  };
}

export async function startTransactingEndpoint(dynamo: DynaliteTable): Promise<TransactingEndpoint> {
  const emulation = await emulateTransactions(dynamo);
  const documents = DynamoDBDocumentClient.from(dynamo.client);
  const transact = transactFromWire(documents);
  const received = { transactions: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.headers['x-amz-target'] === 'DynamoDB_20120810.TransactWriteItems') {
        received.transactions++;
        void transact(Buffer.concat(chunks)).then(({ status, answer }) => {
          res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
          res.end(JSON.stringify(answer));
        });
        return;
      }
      const forward = request(`${dynamo.endpoint}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 500, answer.headers);
        answer.pipe(res);
      });
      forward.on('error', () => res.destroy());
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    emulation,
    received,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      emulation.restore();
    },
  };
}
