/**
 * Every function of the stack built and run as Lambda runs it: its entry bundled with the stack's own
 * esbuild settings (bundledFunctionProps), the bundle copied alone into an empty folder (no
 * node_modules anywhere above it), imported by a fresh `node` with exactly the environment the
 * template gives that function (references replaced by placeholders) plus what the Lambda runtime
 * adds (region, credentials, function name). Used by test/infra/lambda-bundles.test.ts and
 * bench/lambda-init.ts.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { build, type BuildOptions } from 'esbuild';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { CONSUMER_TAG, ENTRY_METADATA, esbuildOptions, PROJECT_ROOT, type EntryMetadata } from '../../lib/function-defaults.js';
import { ROUTE_TAG } from '../../lib/route-function.js';
import { STREAM_ROUTE_TAG } from '../../lib/ai-edge.js';
import { EDGE_TAG } from '../../lib/data-edge.js';
import { flatLogicalId, flatTemplate, synthStack } from '../infra/helpers.js';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DynaliteTable } from './dynalite.js';
import { transactFromWire } from './dynalite-endpoint.js';
import { emulateTransactions } from './dynalite-transactions.js';

export type FunctionKind = 'route' | 'stream' | 'consumer' | 'edge';

export interface StackFunction {
  /** The function's tag value: a route id, or a consumer's name. */
  name: string;
  kind: FunctionKind;
  logicalId: string;
  /** The template's FunctionName (the runtime's AWS_LAMBDA_FUNCTION_NAME). */
  functionName: string;
  /** Entry module, relative to the project (`lambdas/...ts`). */
  entry: string;
  /** The esbuild defines of its bundle (bundleDefines in lib/function-defaults.ts). */
  define: Record<string, string>;
  /** The template's environment, references replaced by placeholders (placeholderOf). */
  environment: Record<string, string>;
}

export const PLACEHOLDER_REGION = 'us-east-1';
const ACCOUNT = '000000000000';

/** The stack's functions (template without bundling) and the DynamoDB tables' placeholder names. */
export function stackFunctions(): { functions: StackFunction[]; tables: { logicalId: string; partitionKey: string; sortKey?: string }[] } {
  const { stack } = synthStack();
  const template = flatTemplate(stack);
  const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: Record<string, any> }>;
  const functions: StackFunction[] = [];
  for (const construct of stack.node.findAll()) {
    const metadata = construct.node.metadata.find((m) => m.type === ENTRY_METADATA)?.data as EntryMetadata | undefined;
    if (!metadata) continue;
    const { entry, define } = metadata;
    const logicalId = flatLogicalId(construct.node.defaultChild as CfnFunction);
    const props = resources[logicalId].Properties;
    const tags = new Map<string, string>((props.Tags ?? []).map((t: { Key: string; Value: string }) => [t.Key, t.Value]));
    const [kind, name] = tags.has(ROUTE_TAG)
      ? (['route', tags.get(ROUTE_TAG)] as const)
      : tags.has(STREAM_ROUTE_TAG)
        ? (['stream', tags.get(STREAM_ROUTE_TAG)] as const)
        : tags.has(EDGE_TAG)
          ? (['edge', tags.get(EDGE_TAG)] as const)
          : (['consumer', tags.get(CONSUMER_TAG)] as const);
    if (!name) throw new Error(`function ${logicalId} (${entry}) carries none of the stack's tags`);
    const variables = (props.Environment?.Variables ?? {}) as Record<string, unknown>;
    const environment = Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, placeholderOf(v, resources)]));
    functions.push({ name, kind, logicalId, functionName: placeholderOf(props.FunctionName, resources), entry, define, environment });
  }
  const tables = Object.entries(resources)
    .filter(([, r]) => r.Type === 'AWS::DynamoDB::Table')
    .map(([logicalId, r]) => {
      const keys = r.Properties.KeySchema as { AttributeName: string; KeyType: string }[];
      return { logicalId, partitionKey: keys.find((k) => k.KeyType === 'HASH')!.AttributeName, sortKey: keys.find((k) => k.KeyType === 'RANGE')?.AttributeName };
    });
  return { functions, tables };
}

/**
 * A CloudFormation value as a string a function could receive: a table's Ref is its logical id (the
 * test creates tables of those names), a queue's Ref a queue URL, an ARN an ARN of the right service.
 */
export function placeholderOf(value: unknown, resources: Record<string, { Type: string }>): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  const v = value as Record<string, any>;
  if ('Ref' in v) {
    const pseudo: Record<string, string> = {
      'AWS::Region': PLACEHOLDER_REGION,
      'AWS::AccountId': ACCOUNT,
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': 'PlatformStack',
    };
    if (pseudo[v.Ref]) return pseudo[v.Ref];
    const type = resources[v.Ref]?.Type;
    if (!type) throw new Error(`Ref to unknown resource ${v.Ref}`);
    if (type === 'AWS::SQS::Queue') return `https://sqs.${PLACEHOLDER_REGION}.amazonaws.com/${ACCOUNT}/${v.Ref}`;
    if (type === 'AWS::SecretsManager::Secret') return `arn:aws:secretsmanager:${PLACEHOLDER_REGION}:${ACCOUNT}:secret:${v.Ref}`;
    return v.Ref;
  }
  if ('Fn::GetAtt' in v) {
    const [id, attribute] = v['Fn::GetAtt'] as [string, string];
    // A vector bucket's ARN ends in its name (lib/vector-bucket.ts reads VECTOR_BUCKET_NAME from it).
    if (attribute === 'VectorBucketArn') return `arn:aws:s3vectors:${PLACEHOLDER_REGION}:${ACCOUNT}:bucket/${id.toLowerCase()}`;
    return attribute === 'Arn' ? `arn:aws:placeholder:${PLACEHOLDER_REGION}:${ACCOUNT}:${id}` : `${id}-${attribute}`;
  }
  if ('Fn::Select' in v) {
    const [index, list] = v['Fn::Select'] as [number | string, Record<string, unknown>];
    const [separator, source] = (list['Fn::Split'] ?? []) as [string, unknown];
    if (separator === undefined) throw new Error(`no placeholder for ${JSON.stringify(value)}`);
    return placeholderOf(source, resources).split(separator)[Number(index)];
  }
  if ('Fn::Join' in v) {
    const [separator, parts] = v['Fn::Join'] as [string, unknown[]];
    return parts.map((p) => placeholderOf(p, resources)).join(separator);
  }
  throw new Error(`no placeholder for ${JSON.stringify(value)}`);
}


export interface Bundle {
  file: string;
  bytes: number;
  /** The source files inside it, relative to the project (esbuild's metafile). */
  inputs: string[];
  /** What it imports at run time, as esbuild left it (external): `node:fs`, or a package it could not inline. */
  externalImports: string[];
}

/** What to bundle: an entry (absolute, or relative to the project) with a function's defines. */
export interface BundleTarget {
  key: string;
  entry: string;
  define?: Record<string, string>;
}

/**
 * Bundles each target into `outdir`, one whole bundle each, with the stack's settings: one esbuild run
 * per set of defines. Returns key -> bundle.
 */
export async function buildBundles(targets: BundleTarget[], outdir: string): Promise<Map<string, Bundle>> {
  const groups = new Map<string, BundleTarget[]>();
  for (const t of targets) {
    const id = JSON.stringify(t.define ?? null);
    groups.set(id, [...(groups.get(id) ?? []), t]);
  }
  const bundles = new Map<string, Bundle>();
  await Promise.all(
    [...groups.values()].map(async (group, g) => {
      const dir = join(outdir, `defines-${g}`);
      const byName = new Map(group.map((t, i) => [`entry-${i}`, t]));
      const result = await build({
        ...esbuildOptions(group[0].define),
        entryPoints: Object.fromEntries([...byName].map(([name, t]) => [name, resolve(PROJECT_ROOT, t.entry)])),
        outdir: dir,
        outExtension: { '.js': '.mjs' },
        metafile: true,
        absWorkingDir: PROJECT_ROOT,
      });
      if (result.errors.length) throw new Error(result.errors.map((e) => e.text).join('\n'));
      for (const [out, meta] of Object.entries(result.metafile!.outputs)) {
        if (!out.endsWith('.mjs')) continue;
        const target = byName.get(relative(dir, join(PROJECT_ROOT, out)).replace(/\.mjs$/, ''));
        if (!target) throw new Error(`esbuild wrote ${out}, which no entry names`);
        bundles.set(target.key, {
          file: join(PROJECT_ROOT, out),
          bytes: meta.bytes,
          inputs: Object.keys(meta.inputs),
          externalImports: [...new Set(meta.imports.filter((i) => i.external).map((i) => i.path))],
        });
      }
    }),
  );
  return bundles;
}

export interface RunOutcome {
  /** The import failed, or the module exports no function `handler`. */
  loadError?: string;
  loadMs?: number;
  /** One per event: what the handler returned, or what it threw. */
  results: ({ value: unknown } | { error: string })[];
  /** The process's own output (logs), for a failure message. */
  output: string;
}

export interface RunOptions {
  /** The function's environment (the template's, placeholders in). */
  environment: Record<string, string>;
  /** Events to hand the handler in turn, once it loaded. */
  events?: unknown[];
  /** A response-streaming function: the runner provides the runtime's `awslambda` global. */
  streaming?: boolean;
  /** AWS_ENDPOINT_URL for every client the bundle builds (a test's stand-in for AWS). */
  awsEndpoint?: string;
  functionName?: string;
}

const RUNNER = join(PROJECT_ROOT, 'test/helpers/lambda-runner.mjs');

/** Copies `bundle` alone into a new empty folder and runs it there in a fresh `node`, as Lambda would. */
export async function runAlone(bundle: string, options: RunOptions): Promise<RunOutcome> {
  const dir = mkdtempSync(join(tmpdir(), 'lambda-task-'));
  try {
    copyFileSync(bundle, join(dir, 'index.mjs'));
    const job = join(dir, '..', `${relative(tmpdir(), dir)}.job.json`);
    const out = `${job}.out.json`;
    writeFileSync(job, JSON.stringify({ module: join(dir, 'index.mjs'), events: options.events ?? [], streaming: options.streaming ?? false, out }));
    const env: Record<string, string> = {
      // What the Lambda runtime sets, then the function's own variables.
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      TZ: ':UTC',
      LANG: 'en_US.UTF-8',
      AWS_REGION: PLACEHOLDER_REGION,
      AWS_DEFAULT_REGION: PLACEHOLDER_REGION,
      AWS_ACCESS_KEY_ID: 'AKIAPLACEHOLDER',
      AWS_SECRET_ACCESS_KEY: 'placeholder',
      AWS_SESSION_TOKEN: 'placeholder',
      AWS_LAMBDA_FUNCTION_NAME: options.functionName ?? 'function',
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
      AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
      // Node 20 runs here, Lambda 22: the SDK's notice about it is noise.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...(options.awsEndpoint ? { AWS_ENDPOINT_URL: options.awsEndpoint } : {}),
      ...options.environment,
    };
    const output = await new Promise<string>((resolve) => {
      execFile(process.execPath, [RUNNER, job], { cwd: dir, env, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
        resolve(`${stdout}${stderr}${error ? `\n[runner: ${error.message}]` : ''}`),
      );
    });
    let outcome: Omit<RunOutcome, 'output'>;
    try {
      outcome = JSON.parse(readFileSync(out, 'utf8'));
    } catch {
      outcome = { loadError: 'the runner wrote no outcome', results: [] };
    }
    rmSync(job, { force: true });
    rmSync(out, { force: true });
    return { ...outcome, output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One AWS call a bundle made: which function (by its access key id), which service and operation. */
export interface AwsCall {
  accessKeyId: string;
  /** `DynamoDB_20120810.GetItem`, `TrentService.GetPublicKey`, or `<METHOD> <path>` for REST services. */
  operation: string;
}

/**
 * The AWS endpoint the bundles are pointed at (AWS_ENDPOINT_URL): DynamoDB's calls go on to a real
 * dynalite, every other call is recorded and refused (the test says which functions may make them).
 * The SDKs stay inside the bundles, as they ship, so they are stood in for on the wire, not mocked.
 * dynalite has no TransactWriteItems: those run through the project's emulation of it
 * (dynalite-transactions.ts), from the request as DynamoDB receives it.
 */
export async function startAwsStandIn(dynamo: DynaliteTable): Promise<{ endpoint: string; calls: AwsCall[]; close(): Promise<void> }> {
  const dynamoEndpoint = dynamo.endpoint;
  const { createServer, request } = await import('node:http');
  const emulation = await emulateTransactions(dynamo);
  // A TransactWriteItems request as DynamoDB gets it, run by the emulation; the answer as DynamoDB gives it.
  const documents = DynamoDBDocumentClient.from(dynamo.client);
  const transact = transactFromWire(documents);
  const calls: AwsCall[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const accessKeyId = /Credential=([^/]+)\//.exec(String(req.headers.authorization ?? ''))?.[1] ?? 'unsigned';
      const target = req.headers['x-amz-target'] as string | undefined;
      calls.push({ accessKeyId, operation: target ?? `${req.method} ${req.url}` });
      if (target === 'DynamoDB_20120810.TransactWriteItems') {
        void transact(Buffer.concat(chunks)).then(({ status, answer }) => {
          res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
          res.end(JSON.stringify(answer));
        });
        return;
      }
      if (target?.startsWith('DynamoDB_')) {
        const forward = request(`${dynamoEndpoint}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 500, answer.headers);
          answer.pipe(res);
        });
        forward.on('error', () => res.destroy());
        forward.end(Buffer.concat(chunks));
        return;
      }
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify({ __type: 'StandInRefused', message: 'not stood in for by this test' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => server.close(() => resolve())).then(() => {
        emulation.restore();
        documents.destroy();
      }),
  };
}
