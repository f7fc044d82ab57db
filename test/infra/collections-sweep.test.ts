/**
 * The collections sweep's function (lambdas/consumers/collections-sweep.ts) run as in AWS: its handler
 * over the AWS adapters, DynamoDB on dynalite (TransactWriteItems emulated), S3 on s3rver, S3 Vectors
 * in memory behind a client mock, SQS on a client mock. A due entry removes its expired collection's
 * items (their packages, vectors, marks and inline texts; never an upload's file, which the uploads
 * sweep owns), a local_vectors collection's own index, then the collection's item and itself; an
 * entry not yet due stays; more than a batch is swept in one run, and a spent budget stops after one
 * batch. Lost processing is sent again to `knowledge`. Index entries no item serves (an item deleted
 * while the processor holding it died) are removed from a workspace's index, organizations in turn,
 * a large index resumed at its cursor by the next run. Every DynamoDB, S3, S3 Vectors and SQS request
 * it sends (each write of a transaction included) is checked against the role the stack synthesizes
 * for it (lib/collections-sweep.ts), and every grant the role holds is used; the rule runs it every 5
 * minutes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { mockClient } from 'aws-sdk-client-mock';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { COLLECTIONS_SWEEP, handler, sweepCollections } from '../../lambdas/consumers/collections-sweep.js';
import { SqsQueue } from '../../lambdas/engine/aws/queue.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine, KvItem } from '../../lambdas/engine/ports.js';
import { collectionKey, collectionSweepKey, COLLECTION_SWEEP_PARTITION, itemKey, itemsPk, packageBlobKey, PROCESSING_PARTITION, sourceBlobKey, processingKey, vectorMarksPk } from '../../lambdas/knowledge/collection-keys.js';
import { chunkEntry, entryKey } from '../../lambdas/knowledge/chunk-index.js';
import { writePackage } from '../../lambdas/knowledge/packages.js';
import { uploadBytesKey } from '../../lambdas/knowledge/upload-keys.js';
import { ENV } from '../../lambdas/shared/settings.js';
import { COLLECTIONS_SWEEP_INDEX_KEYS, COLLECTIONS_SWEEP_OBJECTS, COLLECTIONS_SWEEP_RUN, COLLECTIONS_SWEEP_VECTOR_ACTIONS } from '../../lib/collections-sweep.js';
import { INDEX_SWEEP, registerIndexWrites, sweepIndexes } from '../../lambdas/knowledge/index-sweep.js';
import { indexSweepKey } from '../../lambdas/knowledge/collection-keys.js';
import { databaseKey } from '../../lambdas/vector/keys.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import type { DynaliteTable } from '../helpers/dynalite.js';
import type { TransactionEmulation } from '../helpers/dynalite-transactions.js';
import type { S3VectorsMock } from '../helpers/s3vectors-mock.js';
import type { S3rverBucket } from '../helpers/s3rver.js';
import { dynamoAccesses, grantedLeadingKeys, unusedPort, type Access } from './function-access.js';
import { allowedStatements, consumerFunction, flatTemplate, leadingKeyPattern, logicalIdIn, RUNTIME_ENV_NAMES, synthStack, type AllowStatement } from './helpers.js';

const ORG = 'org_1';
const WS = 'ws_1';
const CLOUD_INDEX = 'wsdb-index';
const clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
const nowSeconds = () => Math.floor(clock.now() / 1000);

let template: Template;
let fn: ReturnType<typeof consumerFunction>;
let statements: AllowStatement[];
let tableArn: string;
let bucketArn: string;
let queueArn: string;
let vectorIndexArns: string;
let dynamo: DynaliteTable;
let s3: S3rverBucket;
let s3vectors: S3VectorsMock;
let full: Engine;
let engine: Engine;
let emulation: TransactionEmulation;
let closeAws: () => Promise<void>;
const sqs = mockClient(SQSClient);
/** S3 requests the blob adapter sent, with S3's answer status. */
const s3Sent: { command: string; key: string; status: number }[] = [];

beforeAll(async () => {
  const { stack } = synthStack();
  template = flatTemplate(stack);
  fn = consumerFunction(template, 'collections-sweep');
  statements = allowedStatements(template, fn);
  tableArn = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.storage.table), 'Arn'] });
  bucketArn = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.storage.bucket), 'Arn'] });
  queueArn = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.queues.byName.knowledge.queue), 'Arn'] });
  vectorIndexArns = JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [logicalIdIn(stack, { node: { defaultChild: stack.vectors.resource } }), 'VectorBucketArn'] }, '/index/*']] });

  const started = await startAwsDataEngine('collections-sweep', { clock });
  ({ dynamo, s3, s3vectors, emulation } = started);
  full = started.engine;
  closeAws = () => started.engine.close();
  s3.client.middlewareStack.add(
    (next, context) => async (args) => {
      const key = String((args.input as { Key?: string }).Key);
      try {
        const out = await next(args);
        s3Sent.push({ command: String(context.commandName), key, status: 200 });
        return out;
      } catch (error) {
        s3Sent.push({ command: String(context.commandName), key, status: (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? 0 });
        throw error;
      }
    },
    { step: 'initialize', name: 'recordS3' },
  );
  sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
  // Only what the function's environment configures: the table, the blob bucket, the vector bucket and the knowledge queue.
  engine = {
    name: 'aws',
    kv: full.kv,
    blobs: full.blobs,
    vectors: full.vectors,
    queue: new SqsQueue(new SQSClient({ region: 'us-east-1' }), { knowledge: 'https://sqs.us-east-1.amazonaws.com/000000000000/knowledge' }),
    connections: unusedPort('connections'),
    signer: unusedPort('signer'),
    secret: unusedPort('secret'),
    upstreamKeys: unusedPort('upstreamKeys'),
    clock,
    async close() {},
  } as unknown as Engine;
  useEngine(engine);
  await engine.vectors.createIndex(CLOUD_INDEX, 3);
}, 120_000);

afterAll(async () => {
  sqs.restore();
  await closeAws?.();
});

// ---------- what the function's adapters send, as IAM authorizes it ----------

/** DynamoDB requests sent through the adapter's client (the emulation's own go through another client) since call `from`. */
const dynamoSince = (from: number) =>
  emulation.stub
    .calls()
    .slice(from)
    .filter((c) => (c.thisValue as { config?: unknown }).config === dynamo.client.config)
    .flatMap((c) => dynamoAccesses(c.args[0] as unknown));

/** S3 requests as IAM authorizes them: HeadObject is s3:GetObject. */
const S3_ACTIONS: Record<string, string> = { GetObjectCommand: 's3:GetObject', HeadObjectCommand: 's3:GetObject', DeleteObjectCommand: 's3:DeleteObject' };
const s3Since = (from: number): (Access & { status: number })[] =>
  s3Sent.slice(from).map((r) => {
    const action = S3_ACTIONS[r.command];
    if (!action) throw new Error(`unexpected S3 request ${r.command}`);
    return { action, on: r.key, status: r.status };
  });
const vectorsSince = (from: number) => s3vectors.stub.calls().slice(from).map((c) => `s3vectors:${(c.args[0] as object).constructor.name.replace(/Command$/, '')}`);

const grantedTable = (action: string) => grantedLeadingKeys(statements, tableArn, action);
/** The grants of the removal and processing sweeps: the index sweep's own are checked by its test. */
const removalGrants = (action: string) => grantedTable(action).filter((p) => !(COLLECTIONS_SWEEP_INDEX_KEYS[action] ?? []).includes(p) || ['kitem#*', 'kproc', 'kcolsweep'].includes(p));
const allowedTable = ({ action, on }: Access) => grantedTable(action).some((p) => leadingKeyPattern(p).test(on));

/** Object key patterns of the blob bucket allowed to `action` (`<bucket ARN>/<pattern>`). */
function grantedObjects(action: string): string[] {
  return statements
    .filter((s) => s.actions.includes(action))
    .flatMap((s) => ([] as unknown[]).concat(JSON.parse(s.resources)))
    .map((resource) => {
      const [ref, suffix] = (resource as { 'Fn::Join': [string, [unknown, string]] })['Fn::Join'][1];
      expect(JSON.stringify(ref)).toBe(bucketArn);
      return suffix.replace(/^\//, '');
    });
}
const listsBucket = () => statements.some((s) => s.actions.includes('s3:ListBucket') && s.resources === bucketArn);

function expectAllowed(accesses: { dynamo: Access[]; s3: (Access & { status: number })[]; vectors: string[] }) {
  for (const a of accesses.dynamo) expect(allowedTable(a), `${a.action} ${a.on}`).toBe(true);
  for (const a of accesses.s3) {
    expect(grantedObjects(a.action).some((p) => leadingKeyPattern(p).test(a.on)), `${a.action} ${a.on}`).toBe(true);
    // S3 answers a missing key 404 only to a role that may list the bucket; without it, 403.
    if (a.status === 404) expect(listsBucket(), `${a.action} ${a.on} answered 404`).toBe(true);
  }
  const vectorActions = statements.filter((s) => s.actions.some((x) => x.startsWith('s3vectors:')));
  for (const action of accesses.vectors) expect(vectorActions.some((s) => s.actions.includes(action) && s.resources === vectorIndexArns), action).toBe(true);
  for (const call of sqs.calls()) expect((call.args[0].input as { QueueUrl: string }).QueueUrl).toMatch(/\/knowledge$/);
}

// ---------- what expired collections leave ----------

/** A collection (its live item and its sweep entry) ending at `at`. */
async function collection(id: string, at: number, mode: 'download' | 'cloud' | 'local_vectors' = 'download', index: string | null = null): Promise<void> {
  await engine.kv.put({ ...collectionKey(ORG, WS, id), mode, index, ends_at: at, expires_at: at });
  await engine.kv.put({ ...collectionSweepKey(at, ORG, WS, id), mode, vector_database_id: mode === 'cloud' ? 'vdb_1' : null, index });
}

/** An item record as items.ts writes it. */
function itemRecord(col: string, id: string, fields: Partial<KvItem> & { mode: string; index: string | null }): KvItem {
  return {
    ...itemKey(ORG, WS, col, id),
    state: 'done',
    upload_id: null,
    filename: 'a.txt',
    content_type: 'text/plain',
    size: 10,
    sha256: 'a'.repeat(64),
    source_key: sourceBlobKey(ORG, WS, col, id),
    pending_package: 'pkg_1',
    package_id: 'pkg_1',
    attempt: 1,
    chunk_count: 2,
    skipped_chunks: 0,
    vectors_stored: 0,
    indexed: true,
    lease_until: 0,
    lease_sk: null,
    owner: JSON.stringify({ organizationId: ORG }),
    created_at: new Date(clock.now()).toISOString(),
    processed_at: null,
    ...fields,
  };
}

const chunks = [
  { chunk_id: 'chk_000000', text: 'Puffins visit in summer.', locator: 'page=1', tokens: 5 },
  { chunk_id: 'chk_000001', text: 'Seals rest on the beach.', locator: 'page=2', tokens: 5 },
];

/** A processed item: its package in the blob store, its chunks' vectors in `index`. */
async function processedItem(col: string, id: string, mode: 'cloud' | 'local_vectors', index: string, fields: Partial<KvItem> = {}): Promise<void> {
  const owner = { org: ORG, workspace: WS, collection: col, id };
  await writePackage(engine, owner, { package_id: 'pkg_1', item_id: id, collection_id: col, filename: 'a.pdf', content_type: 'application/pdf', sha256: 'a'.repeat(64), created_at: 'x' }, [], chunks);
  await engine.vectors.put(index, chunks.map((c, i) => chunkEntry(col, id, 'pkg_1', c, new Float32Array([1, i + 1, 0.5]))!));
  await engine.kv.put(itemRecord(col, id, { mode, index, ...fields }));
}

const vectorKeys = (index: string) => [...(s3vectors.indexes().get(index)?.vectors.keys() ?? [])];

async function clearSweepPartitions(): Promise<void> {
  for (const pk of [COLLECTION_SWEEP_PARTITION, PROCESSING_PARTITION]) for (const item of (await engine.kv.query({ pk })).items) await engine.kv.delete({ pk: item.pk, sk: item.sk });
}

const liveIds = async () => (await engine.kv.query({ pk: collectionKey(ORG, WS, 'x').pk })).items.map((i) => String(i.sk));

describe('the collections sweep in AWS', () => {
  it('runs every 5 minutes from an EventBridge rule, not retried, with the table, the buckets and the knowledge queue in its environment', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: `rate(${COLLECTIONS_SWEEP_RUN.everyMinutes} minutes)`,
      State: 'ENABLED',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } })],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', { Action: 'lambda:InvokeFunction', FunctionName: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] }, Principal: 'events.amazonaws.com' });
    expect(fn.props.Timeout).toBe(COLLECTIONS_SWEEP_RUN.timeoutSeconds);
    expect(COLLECTIONS_SWEEP.budgetMs).toBeLessThanOrEqual((COLLECTIONS_SWEEP_RUN.timeoutSeconds * 1000) / 2);
    expect(Object.keys(fn.props.Environment.Variables).sort()).toEqual([ENV.engine, ENV.tableName, ENV.bucketName, ENV.vectorBucketName, ENV.queueUrls, ...RUNTIME_ENV_NAMES].sort());
    expect(JSON.stringify(fn.props.Environment.Variables[ENV.queueUrls])).toContain(`{\\"knowledge\\":\\"`);
    template.hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: Match.stringLikeRegexp('-collections-sweep-errors$') });
    // The table, two object actions on knowledge/ with the bucket's listing, two vector actions, sending to knowledge (and its logs).
    const others = statements.flatMap((s) => s.actions).filter((a) => !/^(dynamodb|logs):/.test(a));
    expect(others.sort()).toEqual(['s3:DeleteObject', 's3:GetObject', 's3:ListBucket', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage', ...COLLECTIONS_SWEEP_VECTOR_ACTIONS].sort());
    expect(statements.filter((s) => s.actions.includes('sqs:SendMessage')).map((s) => s.resources)).toEqual([queueArn]);
    expect(grantedObjects('s3:GetObject')).toEqual(COLLECTIONS_SWEEP_OBJECTS['s3:GetObject'].map((p) => `${p}*`));
    expect(grantedObjects('s3:DeleteObject')).toEqual(COLLECTIONS_SWEEP_OBJECTS['s3:DeleteObject'].map((p) => `${p}*`));
  });

  it("removes expired collections with their items' packages, vectors, marks and inline texts, with exactly the grants the stack gives it", async () => {
    await clearSweepPartitions();
    const now = nowSeconds();
    const localIndex = 'kcv-0123456789abcdef0123456789abcdef';
    await engine.vectors.createIndex(localIndex, 3);
    // A cloud collection: an item from an upload (its file stays: the uploads sweep owns it), an inline text that failed (no package ever written).
    await collection('col_cloud', now - 10, 'cloud', CLOUD_INDEX);
    const uploaded = uploadBytesKey(ORG, WS, 'b'.repeat(64), 'g1');
    await engine.blobs.put(uploaded, Buffer.from('the upload'));
    await processedItem('col_cloud', 'itm_a', 'cloud', CLOUD_INDEX, { upload_id: 'op-upload', source_key: uploaded });
    await engine.blobs.put(sourceBlobKey(ORG, WS, 'col_cloud', 'itm_b'), Buffer.from('inline'));
    await engine.kv.put(itemRecord('col_cloud', 'itm_b', { mode: 'cloud', index: CLOUD_INDEX, state: 'failed', package_id: null, pending_package: 'pkg_2', chunk_count: 0 }));
    // A queued item with its processing entry (not due): both go with the collection.
    const lease = processingKey(now + 100, ORG, WS, 'col_cloud', 'itm_c');
    await engine.kv.put({ ...lease });
    await engine.kv.put(itemRecord('col_cloud', 'itm_c', { mode: 'cloud', index: CLOUD_INDEX, state: 'queued', package_id: null, pending_package: 'pkg_3', lease_sk: lease.sk }));
    // A local_vectors collection: its item's stored vectors are marked, and its index is its own.
    await collection('col_local', now - 5, 'local_vectors', localIndex);
    await processedItem('col_local', 'itm_d', 'local_vectors', localIndex, { vectors_stored: 2 });
    for (const c of chunks) await engine.kv.put({ pk: vectorMarksPk(ORG, WS, 'col_local', 'itm_d', 'pkg_1'), sk: c.chunk_id });
    // Not due yet: stays.
    await collection('col_later', now + 60);
    expect(vectorKeys(CLOUD_INDEX)).toEqual(expect.arrayContaining([entryKey('itm_a', 'pkg_1', 'chk_000000')]));

    const from = { dynamo: emulation.stub.calls().length, s3: s3Sent.length, vectors: s3vectors.stub.calls().length };
    sqs.resetHistory();
    expect(await handler()).toEqual({ swept: 2, index_entries_removed: 0 });
    const accesses = { dynamo: dynamoSince(from.dynamo), s3: s3Since(from.s3), vectors: vectorsSince(from.vectors) };

    expect((await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items.map((i) => i.sk)).toEqual([collectionSweepKey(now + 60, ORG, WS, 'col_later').sk]);
    expect(await liveIds()).toEqual(['col_later']);
    for (const col of ['col_cloud', 'col_local']) expect((await engine.kv.query({ pk: itemsPk(ORG, WS, col) })).items).toEqual([]);
    expect((await engine.kv.query({ pk: vectorMarksPk(ORG, WS, 'col_local', 'itm_d', 'pkg_1') })).items).toEqual([]);
    expect((await engine.kv.query({ pk: PROCESSING_PARTITION })).items).toEqual([]);
    expect(vectorKeys(CLOUD_INDEX).filter((k) => k.startsWith('itm_a.'))).toEqual([]);
    expect(s3vectors.indexes().has(localIndex)).toBe(false);
    expect(await engine.blobs.head(packageBlobKey(ORG, WS, 'col_cloud', 'itm_a', 'pkg_1'))).toBeUndefined();
    expect(await engine.blobs.head(sourceBlobKey(ORG, WS, 'col_cloud', 'itm_b'))).toBeUndefined();
    expect(await engine.blobs.head(packageBlobKey(ORG, WS, 'col_local', 'itm_d', 'pkg_1'))).toBeUndefined();
    expect(await engine.blobs.head(uploaded)).toEqual({ size: 10 });

    // Every request is allowed by the function's role; a package never written was a 404 (the role lists the bucket)...
    expect(accesses.s3.some((a) => a.action === 's3:GetObject' && a.status === 404)).toBe(true);
    expectAllowed(accesses);
    // ...and every grant it holds for this work was used.
    for (const action of ['dynamodb:Query', 'dynamodb:DeleteItem']) {
      for (const pattern of removalGrants(action).filter((p) => p !== 'kproc' || action === 'dynamodb:DeleteItem')) {
        expect(accesses.dynamo.some((a) => a.action === action && leadingKeyPattern(pattern).test(a.on)), `${action} on ${pattern} unused`).toBe(true);
      }
    }
    for (const action of Object.keys(COLLECTIONS_SWEEP_OBJECTS)) expect(accesses.s3.some((a) => a.action === action), `${action} unused`).toBe(true);
    expect([...new Set(accesses.vectors)].sort()).toEqual(['s3vectors:DeleteIndex', 's3vectors:DeleteVectors']);
  });

  it('sends lost items again to the knowledge queue, and drops entries of items gone, with exactly the grants the stack gives it', async () => {
    await clearSweepPartitions();
    const now = nowSeconds();
    await collection('col_live', now + 3600, 'cloud', CLOUD_INDEX);
    // A queued item whose message was lost: its entry is due.
    const lost = processingKey(now - 1, ORG, WS, 'col_live', 'itm_lost');
    await engine.kv.put({ ...lost });
    await engine.kv.put(itemRecord('col_live', 'itm_lost', { mode: 'cloud', index: CLOUD_INDEX, state: 'queued', package_id: null, pending_package: 'pkg_9', lease_sk: lost.sk }));
    // An entry whose item is gone.
    await engine.kv.put({ ...processingKey(now - 1, ORG, WS, 'col_live', 'itm_gone') });

    const from = { dynamo: emulation.stub.calls().length, s3: s3Sent.length, vectors: s3vectors.stub.calls().length };
    sqs.resetHistory();
    await handler();
    const accesses = { dynamo: dynamoSince(from.dynamo), s3: s3Since(from.s3), vectors: vectorsSince(from.vectors) };

    const sent = sqs.commandCalls(SendMessageCommand).map((c) => JSON.parse(String(c.args[0].input.MessageBody)));
    expect(sent).toEqual([{ org: ORG, workspace: WS, collection: 'col_live', item: 'itm_lost' }]);
    const entries = (await engine.kv.query({ pk: PROCESSING_PARTITION })).items;
    expect(entries).toHaveLength(1);
    expect((await engine.kv.get(itemKey(ORG, WS, 'col_live', 'itm_lost')))?.lease_sk).toBe(entries[0].sk);
    expect(Number(String(entries[0].sk).slice(0, 12))).toBeGreaterThan(now);

    expectAllowed(accesses);
    expect(accesses.s3).toEqual([]);
    expect(accesses.vectors).toEqual([]);
    for (const action of ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem']) {
      for (const pattern of removalGrants(action)) expect(accesses.dynamo.some((a) => a.action === action && leadingKeyPattern(pattern).test(a.on)), `${action} on ${pattern} unused`).toBe(true);
    }
    expect(accesses.dynamo.some((a) => a.action === 'dynamodb:Query' && a.on === PROCESSING_PARTITION)).toBe(true);
    expect(accesses.dynamo.some((a) => a.action === 'dynamodb:DeleteItem' && a.on === PROCESSING_PARTITION)).toBe(true);
    // Every action the role holds on the table was used by the two runs (this one and the removal's).
    const actions = [...new Set(statements.flatMap((s) => s.actions).filter((a) => a.startsWith('dynamodb:')))];
    expect(actions.sort()).toEqual(['dynamodb:BatchGetItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem']);
  });

  it('removes index entries no item serves (an item deleted while the processor holding it died), organizations in turn, a large index resumed at its cursor, with exactly the grants the stack gives it', async () => {
    await clearSweepPartitions();
    const now = nowSeconds();
    const WS2 = 'ws_2';
    const ORG2 = 'org_2';
    const OTHER_INDEX = 'wsdb-other';
    await engine.vectors.createIndex(OTHER_INDEX, 3);
    const database = (org: string, workspace: string, index: string, id: string) =>
      engine.kv.put({ ...databaseKey(workspace), workspace_id: workspace, organization_id: org, database_id: id, state: 'active', embedding_route: 'emb', upstream_model: 'm', dimensions: 3, index, created_at: 'x', passages: 0, bytes: 0 });
    await database(ORG, WS, CLOUD_INDEX, 'vdb_1');
    await database(ORG2, WS2, OTHER_INDEX, 'vdb_2');
    // Registered as a cloud collection's creation registers them.
    await engine.kv.transact(registerIndexWrites(engine, ORG, WS, CLOUD_INDEX));
    await engine.kv.transact(registerIndexWrites(engine, ORG2, WS2, OTHER_INDEX));
    const chunk = (n: number) => ({ chunk_id: `chk_${String(n).padStart(6, '0')}`, text: `chunk ${n}`, locator: `line=${n}`, tokens: 2 });
    const put = async (index: string, col: string, item: string, pkg: string, count: number) => {
      const entries = Array.from({ length: count }, (_, n) => chunkEntry(col, item, pkg, chunk(n), new Float32Array([1, n + 1, 0.5]))!);
      for (let i = 0; i < entries.length; i += 500) await engine.vectors.put(index, entries.slice(i, i + 500));
    };
    await collection('col_idx', now + 3600, 'cloud', CLOUD_INDEX);
    // Served: more than two pages of entries, listed before the orphans (keys sort by item).
    await engine.kv.put(itemRecord('col_idx', 'itm_0001', { mode: 'cloud', index: CLOUD_INDEX }));
    await put(CLOUD_INDEX, 'col_idx', 'itm_0001', 'pkg_1', INDEX_SWEEP.page * 2 + 100);
    // Processing: its pending package's entries are being put, and stay.
    await engine.kv.put(itemRecord('col_idx', 'itm_0002', { mode: 'cloud', index: CLOUD_INDEX, state: 'processing', package_id: null, pending_package: 'pkg_2' }));
    await put(CLOUD_INDEX, 'col_idx', 'itm_0002', 'pkg_2', 3);
    // Deleted while its processor (killed) held it: no item, its package's entries and blob left.
    await put(CLOUD_INDEX, 'col_idx', 'itm_f001', 'pkg_3', 4);
    await writePackage(engine, { org: ORG, workspace: WS, collection: 'col_idx', id: 'itm_f001' }, { package_id: 'pkg_3', item_id: 'itm_f001', collection_id: 'col_idx', filename: 'a.txt', content_type: 'text/plain', sha256: 'a'.repeat(64), created_at: 'x' }, [], chunks);
    // Re-processed: it serves pkg_5; the old package's entries were never removed (killed after its final write).
    await engine.kv.put(itemRecord('col_idx', 'itm_f002', { mode: 'cloud', index: CLOUD_INDEX, package_id: 'pkg_5', pending_package: 'pkg_5' }));
    await put(CLOUD_INDEX, 'col_idx', 'itm_f002', 'pkg_4', 2);
    await put(CLOUD_INDEX, 'col_idx', 'itm_f002', 'pkg_5', 2);
    // The vector database's own passages: never looked at.
    await engine.vectors.put(CLOUD_INDEX, [{ key: 'itm_f003.pkg_6.chk_000000', vector: new Float32Array([1, 1, 1]), filterable: { scope: 'shared' }, payload: '{}' }]);
    // Another organization's index: one orphan, of a collection deleted with it.
    await put(OTHER_INDEX, 'col_gone', 'itm_f004', 'pkg_7', 2);
    const before = vectorKeys(CLOUD_INDEX).length;

    // One run of two pages: each organization gets one, so the small index is clean at once while the large one waits at its cursor.
    expect(await sweepIndexes(engine, { pages: 2 })).toEqual({ pages: 2, removed: 2 });
    expect(vectorKeys(OTHER_INDEX)).toEqual([]);
    expect(vectorKeys(CLOUD_INDEX)).toHaveLength(before);
    expect((await engine.kv.get(indexSweepKey(ORG, WS, CLOUD_INDEX)))?.cursor).toEqual(expect.any(String));
    expect((await engine.kv.get(indexSweepKey(ORG2, WS2, OTHER_INDEX)))).toMatchObject({ cursor: null, pass_ended_at: now });

    // The scheduled run goes on from the cursor (the other organization's index is not due), through to the pass's end.
    const from = { dynamo: emulation.stub.calls().length, s3: s3Sent.length, vectors: s3vectors.stub.calls().length };
    sqs.resetHistory();
    expect(await handler()).toEqual({ swept: 0, index_entries_removed: 6 });
    const accesses = { dynamo: dynamoSince(from.dynamo), s3: s3Since(from.s3), vectors: vectorsSince(from.vectors) };
    const left = vectorKeys(CLOUD_INDEX);
    expect(left.filter((k) => !k.startsWith('itm_0001.'))).toEqual(['itm_0002.pkg_2.chk_000000', 'itm_0002.pkg_2.chk_000001', 'itm_0002.pkg_2.chk_000002', 'itm_f002.pkg_5.chk_000000', 'itm_f002.pkg_5.chk_000001', 'itm_f003.pkg_6.chk_000000']);
    expect(left.filter((k) => k.startsWith('itm_0001.pkg_1.'))).toHaveLength(INDEX_SWEEP.page * 2 + 100);
    expect(await engine.blobs.head(packageBlobKey(ORG, WS, 'col_idx', 'itm_f001', 'pkg_3'))).toBeUndefined();
    expect(await engine.kv.get(indexSweepKey(ORG, WS, CLOUD_INDEX))).toMatchObject({ cursor: null, pass_ended_at: now });
    // A second run finds nothing due: no listing.
    const quiet = s3vectors.stub.calls().length;
    expect(await handler()).toEqual({ swept: 0, index_entries_removed: 0 });
    expect(vectorsSince(quiet)).toEqual([]);

    // Listed with metadata (ListVectors needs GetVectors for it); every request allowed, every index-sweep grant used.
    const lists = s3vectors.calls().filter((c) => c.command === 'ListVectors').slice(-2);
    for (const call of lists) expect(call.input).toMatchObject({ indexName: CLOUD_INDEX, maxResults: INDEX_SWEEP.page, returnMetadata: true });
    expect(lists[1].input.nextToken).toEqual(expect.any(String));
    expectAllowed(accesses);
    expect(new Set(accesses.vectors)).toEqual(new Set(['s3vectors:ListVectors', 's3vectors:DeleteVectors']));
    expect(statements.some((st) => st.actions.includes('s3vectors:GetVectors') && st.resources === vectorIndexArns)).toBe(true);
    const used = [...accesses.dynamo, ...dynamoSince(0).filter((a) => a.on.startsWith('kidx'))];
    for (const [action, patterns] of Object.entries(COLLECTIONS_SWEEP_INDEX_KEYS)) {
      for (const pattern of patterns.filter((p) => !(action === 'dynamodb:DeleteItem'))) expect(used.some((a) => a.action === action && leadingKeyPattern(pattern).test(a.on)), `${action} on ${pattern} unused`).toBe(true);
    }
  }, 60_000);

  it('drops the registry entry of an index whose database is gone, and an organization left without indexes', async () => {
    await engine.kv.put({ ...databaseKey(WS), workspace_id: WS, organization_id: ORG, database_id: 'vdb_3', state: 'active', index: 'wsdb-newer', dimensions: 3 });
    await engine.kv.delete(databaseKey('ws_2'));
    await engine.kv.update({ key: indexSweepKey(ORG, WS, CLOUD_INDEX), set: { pass_ended_at: 0 } });
    await engine.kv.update({ key: indexSweepKey('org_2', 'ws_2', 'wsdb-other'), set: { pass_ended_at: 0 } });
    const from = emulation.stub.calls().length;
    // The first run drops the indexes, the second the organizations left without any.
    expect(await sweepIndexes(engine)).toEqual({ pages: 0, removed: 0 });
    expect(await sweepIndexes(engine)).toEqual({ pages: 0, removed: 0 });
    const accesses = dynamoSince(from);
    expect(await engine.kv.get(indexSweepKey(ORG, WS, CLOUD_INDEX))).toBeUndefined();
    expect(await engine.kv.get(indexSweepKey('org_2', 'ws_2', 'wsdb-other'))).toBeUndefined();
    expect((await engine.kv.query({ pk: 'kidxorg' })).items).toEqual([]);
    expectAllowed({ dynamo: accesses, s3: [], vectors: [] });
    for (const pattern of COLLECTIONS_SWEEP_INDEX_KEYS['dynamodb:DeleteItem']) expect(accesses.some((a) => a.action === 'dynamodb:DeleteItem' && leadingKeyPattern(pattern).test(a.on)), pattern).toBe(true);
    await engine.kv.delete(databaseKey(WS));
  });

  it('sweeps more than a batch in one run, and a spent budget stops after one batch', async () => {
    await clearSweepPartitions();
    const now = nowSeconds();
    const count = COLLECTIONS_SWEEP.batch + 20;
    for (let i = 0; i < count; i++) await collection(`col_bulk_${String(i).padStart(4, '0')}`, now - 1);
    expect(await sweepCollections(engine, 0)).toBe(COLLECTIONS_SWEEP.batch);
    expect((await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items).toHaveLength(20);
    for (let i = 0; i < count; i++) await collection(`col_more_${String(i).padStart(4, '0')}`, now - 1);
    expect(await handler()).toEqual({ swept: count + 20, index_entries_removed: 0 });
    expect((await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items).toEqual([]);
    expect((await liveIds()).filter((id) => id.startsWith('col_bulk_') || id.startsWith('col_more_'))).toEqual([]);
  }, 60_000);
});
