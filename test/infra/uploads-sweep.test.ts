/**
 * The uploads sweep's function (lambdas/consumers/uploads-sweep.ts) run as in AWS: its handler over the
 * AWS adapters, DynamoDB on dynalite and S3 on a client mock. Due entries of expired uploads abort their
 * multipart uploads and delete stored bytes no live upload names; an entry not yet due stays; more
 * than a batch is swept in one run, and a spent budget stops after one batch. Every DynamoDB and S3
 * request it sends is checked against the role the stack synthesizes for it (lib/uploads-sweep.ts), and
 * every grant the role holds is used; the rule runs it every 5 minutes.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { mockClient } from 'aws-sdk-client-mock';
import { AbortMultipartUploadCommand, DeleteObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { handler, sweepUploads, UPLOADS_SWEEP } from '../../lambdas/consumers/uploads-sweep.js';
import { S3BlobStore } from '../../lambdas/engine/aws/blobs.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { storedFileKey, sweepKey, SWEEP_PARTITION, uploadBytesKey, uploadKey } from '../../lambdas/knowledge/upload-keys.js';
import { ENV } from '../../lambdas/shared/settings.js';
import { UPLOADS_SWEEP_RUN } from '../../lib/uploads-sweep.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';
import { dynamoAccesses, grantedLeadingKeys, unusedPort, type Access } from './function-access.js';
import { allowedStatements, consumerFunction, flatTemplate, leadingKeyPattern, logicalIdIn, RUNTIME_ENV_NAMES, synthStack, type AllowStatement } from './helpers.js';

const BUCKET = 'blobs-bucket';
const s3 = mockClient(S3Client);

const ORG = 'org_1';
const WS = 'ws_1';
const clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
const nowSeconds = () => Math.floor(clock.now() / 1000);

let template: Template;
let fn: ReturnType<typeof consumerFunction>;
let statements: AllowStatement[];
let tableArn: string;
let bucketId: string;
let dynamo: DynaliteTable;
let engine: Engine;

beforeAll(async () => {
  const { stack } = synthStack();
  template = flatTemplate(stack);
  fn = consumerFunction(template, 'uploads-sweep');
  statements = allowedStatements(template, fn);
  tableArn = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.storage.table), 'Arn'] });
  bucketId = logicalIdIn(stack, stack.storage.bucket);

  dynamo = await startDynalite();
  // Only what the function's environment configures: the table and the blob bucket.
  engine = {
    name: 'aws',
    kv: new DynamoKeyValueStore(dynamo.client, dynamo.tableName, clock),
    blobs: new S3BlobStore(new S3Client({ region: 'us-east-1' }), BUCKET),
    queue: unusedPort('queue'),
    connections: unusedPort('connections'),
    signer: unusedPort('signer'),
    secret: unusedPort('secret'),
    clock,
    async close() {},
  } as unknown as Engine;
  useEngine(engine);
}, 120_000);

beforeEach(() => {
  s3.reset();
  s3.on(AbortMultipartUploadCommand).resolves({});
  s3.on(DeleteObjectCommand).resolves({});
});

afterAll(async () => {
  s3.restore();
  docs.restore();
  await dynamo?.close();
});

// ---------- what the function's adapters send, as IAM authorizes it ----------

/** The adapter's DynamoDB requests, recorded on its document client and passed on to dynalite. */
const docs = mockClient(DynamoDBDocumentClient);
docs.send.callThrough();
const sentSince = (from: number) => docs.calls().slice(from).map((c) => c.args[0] as unknown);

function s3Accesses(): Access[] {
  return s3.calls().map((c) => {
    const command = c.args[0] as { input: { Bucket?: string; Key?: string } };
    expect(command.input.Bucket).toBe(BUCKET);
    if (command instanceof AbortMultipartUploadCommand) return { action: 's3:AbortMultipartUpload', on: String(command.input.Key) };
    if (command instanceof DeleteObjectCommand) return { action: 's3:DeleteObject', on: String(command.input.Key) };
    throw new Error(`unexpected S3 request ${(command as object).constructor.name}`);
  });
}

/** The object key patterns of the blob bucket allowed to `action` (`<bucket ARN>/<pattern>`). */
function grantedObjects(action: string): string[] {
  return statements
    .filter((s) => s.actions.includes(action))
    .map((s) => {
      const resource = JSON.parse(s.resources) as { 'Fn::Join': [string, [{ 'Fn::GetAtt': [string, string] }, string]] };
      const [ref, suffix] = resource['Fn::Join'][1];
      expect(ref).toEqual({ 'Fn::GetAtt': [bucketId, 'Arn'] });
      return suffix.replace(/^\//, '');
    });
}

const granted = (action: string) => (action.startsWith('s3:') ? grantedObjects(action) : grantedLeadingKeys(statements, tableArn, action));
const allowed = ({ action, on }: Access) => granted(action).some((p) => leadingKeyPattern(p).test(on));

// ---------- what expired uploads leave ----------

const STAGING = (n: number) => `${n.toString(16).padStart(32, '0')}.s3-upload-${n}`;
const SHA = (c: string) => c.repeat(64);

/** An unfinished upload (its item, its parts' entry), expiring at `at`. */
async function openUpload(id: string, gen: string, at: number): Promise<void> {
  await engine.kv.put({ ...uploadKey(ORG, id), gen, status: 'pending', expires_at: at, workspace_id: WS });
  await engine.kv.put({ ...sweepKey(at, `parts#${ORG}#${id}#${gen}`), blob_key: `ai-uploads/${ORG}/${WS}/${SHA('0')}.${gen}`, engine_upload_id: STAGING(Number.parseInt(gen.slice(1), 10)) });
}

/** A stored file naming `gen`, expiring at `fileAt`, and an entry for a generation's bytes due at `at`. */
async function storedBytes(sha: string, gen: string, entryGen: string, at: number, fileAt: number | null): Promise<void> {
  await engine.kv.put({ ...storedFileKey(ORG, WS, sha), gen, expires_at: fileAt });
  await engine.kv.put({ ...sweepKey(at, `file#${ORG}#${WS}#${sha}#${entryGen}`), org: ORG, workspace: WS, sha256: sha, gen: entryGen });
}

async function clearSweepPartition(): Promise<void> {
  for (const item of (await engine.kv.query({ pk: SWEEP_PARTITION })).items) await engine.kv.delete({ pk: item.pk, sk: item.sk });
}

describe('the uploads sweep in AWS', () => {
  it('runs every 5 minutes from an EventBridge rule, not retried, with the table and bucket only in its environment', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: `rate(${UPLOADS_SWEEP_RUN.everyMinutes} minutes)`,
      State: 'ENABLED',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } })],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', { Action: 'lambda:InvokeFunction', FunctionName: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] }, Principal: 'events.amazonaws.com' });
    // A run stops starting batches well before the function's timeout.
    expect(fn.props.Timeout).toBe(UPLOADS_SWEEP_RUN.timeoutSeconds);
    expect(UPLOADS_SWEEP.budgetMs).toBeLessThanOrEqual((UPLOADS_SWEEP_RUN.timeoutSeconds * 1000) / 2);
    expect(Object.keys(fn.props.Environment.Variables).sort()).toEqual([ENV.bucketName, ENV.engine, ENV.tableName, ...RUNTIME_ENV_NAMES].sort());
    // Its errors alarm, as every function's (lib/operations.ts).
    template.hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: Match.stringLikeRegexp('-uploads-sweep-errors$') });
    // No queue, secret, key or other service.
    expect(statements.flatMap((s) => s.actions).filter((a) => !/^(dynamodb|s3|logs):/.test(a))).toEqual([]);
  });

  it('aborts expired uploads\' parts and deletes bytes nothing names, with exactly the grants the stack gives it', async () => {
    await clearSweepPartition();
    const now = nowSeconds();
    // Expired, unfinished: its multipart upload is aborted and its item removed.
    await openUpload('up-open', 'g1', now - 10);
    // Started again under the same id (a new generation): the old parts go, the new upload stays.
    await openUpload('up-again', 'g2', now - 5);
    await engine.kv.put({ ...uploadKey(ORG, 'up-again'), gen: 'g3', status: 'pending', expires_at: now + 3600, workspace_id: WS });
    // A stored file expired: its bytes removed (its item is gone to every read already; TTL deletes it).
    await storedBytes(SHA('a'), 'ga', 'ga', now - 10, now - 10);
    // The one stored file a read still shows once its entry is due: one with no expiry (none is written
    // so, but the sweep must not keep its bytes for ever). Its item goes (conditionally), then its bytes:
    // the path that needs DeleteItem on stored files.
    await storedBytes(SHA('d'), 'gd', 'gd', now - 10, null);
    // A stored file a later upload extended: its bytes stay, the entry goes.
    await storedBytes(SHA('b'), 'gb', 'gb', now - 10, now + 3600);
    // A second upload's own generation of kept bytes: deleted, the stored file (another generation) stays.
    await storedBytes(SHA('c'), 'gc1', 'gc2', now - 10, now + 3600);
    // Not due yet: stays.
    await openUpload('up-later', 'g4', now + 60);

    const from = docs.calls().length;
    expect(await handler()).toEqual({ swept: 6 });
    const sent = sentSince(from);
    const s3Done = s3Accesses();

    expect((await engine.kv.query({ pk: SWEEP_PARTITION })).items.map((i) => i.sk)).toEqual([sweepKey(now + 60, `parts#${ORG}#up-later#g4`).sk]);
    expect(await engine.kv.get(uploadKey(ORG, 'up-open'))).toBeUndefined();
    expect(await engine.kv.get(uploadKey(ORG, 'up-again'))).toMatchObject({ gen: 'g3' });
    expect(await engine.kv.get(storedFileKey(ORG, WS, SHA('a')))).toBeUndefined();
    expect(await engine.kv.get(storedFileKey(ORG, WS, SHA('d')))).toBeUndefined();
    expect(await engine.kv.get(storedFileKey(ORG, WS, SHA('b')))).toMatchObject({ gen: 'gb' });
    expect(await engine.kv.get(storedFileKey(ORG, WS, SHA('c')))).toMatchObject({ gen: 'gc1' });
    expect(s3Done.filter((a) => a.action === 's3:DeleteObject').map((a) => a.on).sort()).toEqual(
      [uploadBytesKey(ORG, WS, SHA('a'), 'ga'), uploadBytesKey(ORG, WS, SHA('c'), 'gc2'), uploadBytesKey(ORG, WS, SHA('d'), 'gd')].sort(),
    );
    expect(s3Done.filter((a) => a.action === 's3:AbortMultipartUpload').map((a) => a.on).sort()).toEqual([`.staging/${STAGING(1).split('.')[0]}`, `.staging/${STAGING(2).split('.')[0]}`]);

    // Every request is allowed by the function's role...
    expect(sent.length).toBeGreaterThan(0);
    const accesses = [...sent.flatMap(dynamoAccesses), ...s3Done];
    for (const a of accesses) expect(allowed(a), `${a.action} ${a.on}`).toBe(true);
    // ...and every grant it holds was used.
    const actions = [...new Set(statements.flatMap((s) => s.actions).filter((a) => /^(dynamodb|s3):/.test(a)))];
    expect(actions.sort()).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:Query', 's3:AbortMultipartUpload', 's3:DeleteObject']);
    for (const action of actions) {
      for (const pattern of granted(action)) expect(accesses.some((a) => a.action === action && leadingKeyPattern(pattern).test(a.on)), `${action} on ${pattern} unused`).toBe(true);
    }
  });

  it('sweeps more than a batch in one run, and a spent budget stops after one batch', async () => {
    await clearSweepPartition();
    const now = nowSeconds();
    const count = UPLOADS_SWEEP.batch + 20;
    for (let i = 0; i < count; i++) await engine.kv.put({ ...sweepKey(now - 1, `parts#${ORG}#bulk-${i}#g${1000 + i}`), blob_key: 'ai-uploads/x', engine_upload_id: STAGING(1000 + i) });
    expect(await sweepUploads(engine, 0)).toBe(UPLOADS_SWEEP.batch);
    expect((await engine.kv.query({ pk: SWEEP_PARTITION })).items).toHaveLength(20);
    for (let i = 0; i < count; i++) await engine.kv.put({ ...sweepKey(now - 1, `parts#${ORG}#more-${i}#g${2000 + i}`), blob_key: 'ai-uploads/x', engine_upload_id: STAGING(2000 + i) });
    expect(await handler()).toEqual({ swept: count + 20 });
    expect((await engine.kv.query({ pk: SWEEP_PARTITION })).items).toEqual([]);
  }, 60_000);
});
