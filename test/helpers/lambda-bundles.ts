/**
 * Every function of the stack built and run as Lambda runs it: its entry bundled with the stack's own
 * esbuild settings (bundledFunctionProps), the bundle copied alone into an empty folder (no
 * node_modules anywhere above it), imported by a fresh `node` with exactly the environment the
 * template gives that function (references replaced by placeholders) plus what the Lambda runtime
 * adds (region, credentials, function name). Used by test/infra/lambda-bundles.test.ts and
 * bench/lambda-init.ts.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { build, version as esbuildVersion, type BuildOptions } from 'esbuild';
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
  /** What its role allows (the template's IAM policies, placeholders in): what the AWS stand-in lets it do. */
  allowed: AllowStatement[];
}

/** One Allow statement of a function's role: actions, resources (IAM wildcards), and the one condition the stack uses. */
export interface AllowStatement {
  actions: string[];
  resources: string[];
  /** `ForAllValues:StringLike` on `dynamodb:LeadingKeys`: the partition keys the statement is limited to. */
  leadingKeys?: string[];
}

/** A DynamoDB table of the template, under its placeholder name (its logical id), with its indexes' partition keys. */
export interface StackTable {
  logicalId: string;
  partitionKey: string;
  sortKey?: string;
  /** Global secondary index name -> its partition key. */
  indexes: Record<string, string>;
}

export const PLACEHOLDER_REGION = 'us-east-1';
const ACCOUNT = '000000000000';

/** The stack's functions (template without bundling) and the DynamoDB tables' placeholder names. */
export function stackFunctions(): { functions: StackFunction[]; tables: StackTable[]; secrets: string[] } {
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
    const environment = Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, resolvedDynamicReference(placeholderOf(v, resources))]));
    const allowed = props.Role ? roleStatements(props.Role['Fn::GetAtt'][0] as string, resources) : [];
    functions.push({ name, kind, logicalId, functionName: placeholderOf(props.FunctionName, resources), entry, define, environment, allowed });
  }
  type KeySchema = { AttributeName: string; KeyType: string }[];
  const hash = (keys: KeySchema) => keys.find((k) => k.KeyType === 'HASH')!.AttributeName;
  const tables = Object.entries(resources)
    .filter(([, r]) => r.Type === 'AWS::DynamoDB::Table')
    .map(([logicalId, r]) => {
      const keys = r.Properties.KeySchema as KeySchema;
      const indexes = Object.fromEntries(((r.Properties.GlobalSecondaryIndexes ?? []) as { IndexName: string; KeySchema: KeySchema }[]).map((i) => [i.IndexName, hash(i.KeySchema)]));
      return { logicalId, partitionKey: hash(keys), sortKey: keys.find((k) => k.KeyType === 'RANGE')?.AttributeName, indexes };
    });
  const secrets = Object.keys(resources).filter((id) => resources[id].Type === 'AWS::SecretsManager::Secret').map((id) => placeholderOf({ Ref: id }, resources));
  return { functions, tables, secrets };
}

/**
 * The Allow statements of every policy attached to a role, resources as placeholders. A condition other
 * than the stack's LeadingKeys one fails here, so the stand-in never lets through what IAM would not.
 */
function roleStatements(roleId: string, resources: Record<string, { Type: string; Properties: Record<string, any> }>): AllowStatement[] {
  // AWS's basic execution policy grants logging only (the edge function's role has it); any other managed policy is unknown here.
  const managed = ((resources[roleId]?.Properties.ManagedPolicyArns ?? []) as unknown[]).map((arn) => placeholderOf(arn, resources));
  const unknown = managed.filter((arn) => !arn.endsWith(':iam::aws:policy/service-role/AWSLambdaBasicExecutionRole'));
  if (unknown.length) throw new Error(`role ${roleId} has managed policies the stand-in cannot read: ${unknown.join(', ')}`);
  const policies = Object.values(resources).filter((r) => r.Type === 'AWS::IAM::Policy' && (r.Properties.Roles as { Ref?: string }[]).some((role) => role.Ref === roleId));
  return policies.flatMap((p) =>
    (p.Properties.PolicyDocument.Statement as { Effect: string; Action: string | string[]; Resource: unknown; Condition?: Record<string, Record<string, unknown>> }[])
      .filter((s) => s.Effect === 'Allow')
      .map((s) => {
        const { 'ForAllValues:StringLike': like, ...others } = s.Condition ?? {};
        const { 'dynamodb:LeadingKeys': leadingKeys, ...otherKeys } = like ?? {};
        if (Object.keys(others).length || Object.keys(otherKeys).length) throw new Error(`role ${roleId}: a condition the stand-in does not evaluate: ${JSON.stringify(s.Condition)}`);
        return {
          actions: ([] as string[]).concat(s.Action),
          resources: ([] as unknown[]).concat(s.Resource).map((r) => placeholderOf(r, resources)),
          ...(leadingKeys ? { leadingKeys: ([] as string[]).concat(leadingKeys as string | string[]) } : {}),
        };
      }),
  );
}

/** An IAM wildcard (`*` any run, `?` one character) as a regular expression. */
const wildcard = (pattern: string, flags = '') => new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, flags);

/** One request as IAM authorizes it: an action on a resource, and the partition keys it touches (DynamoDB). */
export interface Authorization {
  action: string;
  resource: string;
  leadingKeys?: string[];
}

/** Whether some statement allows it (actions match case-insensitively, resources exactly; LeadingKeys as ForAllValues:StringLike). */
export function allows(statements: readonly AllowStatement[], request: Authorization): boolean {
  return statements.some(
    (s) =>
      s.actions.some((a) => wildcard(a, 'i').test(request.action)) &&
      s.resources.some((r) => wildcard(r).test(request.resource)) &&
      (!s.leadingKeys || (request.leadingKeys ?? []).every((k) => s.leadingKeys!.some((p) => wildcard(p).test(k)))),
  );
}

/**
 * A CloudFormation value as a string a function could receive: a table's Ref is its logical id (the
 * test creates tables of those names), a queue's Ref a queue URL, an ARN an ARN of the right service.
 */
/**
 * A CloudFormation dynamic reference to a secret (`{{resolve:secretsmanager:<arn>:SecretString:::}}`, the
 * console's origin header value) as CloudFormation resolves it at deployment: a value of the secret's own
 * shape (letters and digits), the same for the same secret.
 */
export function resolvedDynamicReference(value: string): string {
  const ref = /^\{\{resolve:secretsmanager:(.+):SecretString:::\}\}$/.exec(value);
  return ref ? createHash('sha256').update(ref[1]).digest('hex') : value;
}

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

/** What buildBundles may do differently from the stack. */
export interface BuildBundlesOptions {
  /**
   * Source maps as the stack writes them (default), or none: a test that loads a bundle alone never
   * reads its map, and writing maps is about a fifth of esbuild's work.
   */
  sourcemap?: boolean;
}

/**
 * Bundles each target with the stack's settings, one whole bundle each: one esbuild run per set of
 * defines (all its entry points at once), the runs in parallel. Returns key -> bundle.
 *
 * Each run's output is kept in node_modules/.cache/lambda-bundles under a key of its options and
 * entries, with the content hash of every file esbuild read (its metafile's inputs) and of the package
 * lock and tsconfig: a later build (another test file, the next run) with all of them unchanged reuses
 * it, any change rebuilds. `outdir` holds what is built; a reused bundle is read from the cache.
 */
export async function buildBundles(targets: BundleTarget[], outdir: string, options: BuildBundlesOptions = {}): Promise<Map<string, Bundle>> {
  const groups = new Map<string, BundleTarget[]>();
  for (const t of targets) {
    const id = JSON.stringify(t.define ?? null);
    groups.set(id, [...(groups.get(id) ?? []), t]);
  }
  const bundles = new Map<string, Bundle>();
  const contentHash = memoizedContentHash();
  await Promise.all(
    [...groups.values()].map(async (group, g) => {
      const byName = new Map(group.map((t, i) => [`entry-${i}`, t]));
      const buildOptions: BuildOptions = {
        ...esbuildOptions(group[0].define),
        ...(options.sourcemap === false ? { sourcemap: false } : {}),
        entryPoints: Object.fromEntries([...byName].map(([name, t]) => [name, resolve(PROJECT_ROOT, t.entry)])),
        outExtension: { '.js': '.mjs' },
        metafile: true,
        absWorkingDir: PROJECT_ROOT,
      };
      const built = await cachedBuild(buildOptions, join(outdir, `defines-${g}`), contentHash);
      for (const [name, bundle] of Object.entries(built)) {
        const target = byName.get(name);
        if (!target) throw new Error(`esbuild wrote ${name}, which no entry names`);
        bundles.set(target.key, bundle);
      }
    }),
  );
  return bundles;
}

const CACHE_DIR = join(PROJECT_ROOT, 'node_modules', '.cache', 'lambda-bundles');

/** What the cache keeps of one esbuild run: its bundles by entry name, and the content hash of each input. */
interface CacheManifest {
  inputs: Record<string, string>;
  bundles: Record<string, Omit<Bundle, 'file'>>;
}

/** sha256 of a file (relative to the project), each read once per buildBundles call; undefined when there is none. */
function memoizedContentHash(): (path: string) => Promise<string | undefined> {
  const hashes = new Map<string, Promise<string | undefined>>();
  return (path) => {
    let hash = hashes.get(path);
    if (!hash) {
      hash = readFile(join(PROJECT_ROOT, path)).then(
        (bytes) => createHash('sha256').update(bytes).digest('hex'),
        () => undefined,
      );
      hashes.set(path, hash);
    }
    return hash;
  };
}

/** One esbuild run into `dir`, or its cached output when nothing it read changed since: entry name -> bundle. */
async function cachedBuild(buildOptions: BuildOptions, dir: string, contentHash: (path: string) => Promise<string | undefined>): Promise<Record<string, Bundle>> {
  // The lock file and tsconfig decide how imports resolve, beyond the files read.
  const resolution = [await contentHash('package-lock.json'), await contentHash('tsconfig.json')];
  const key = createHash('sha256').update(JSON.stringify({ esbuild: esbuildVersion, resolution, root: PROJECT_ROOT, buildOptions })).digest('hex').slice(0, 32);
  const cacheDir = join(CACHE_DIR, key);
  try {
    const manifest = JSON.parse(await readFile(join(cacheDir, 'manifest.json'), 'utf8')) as CacheManifest;
    const unchanged = await Promise.all(Object.entries(manifest.inputs).map(async ([path, hash]) => (await contentHash(path)) === hash));
    if (unchanged.every(Boolean)) return Object.fromEntries(Object.entries(manifest.bundles).map(([name, b]) => [name, { ...b, file: join(cacheDir, `${name}.mjs`) }]));
  } catch {
    // No usable cache entry: build.
  }
  const result = await build({ ...buildOptions, outdir: dir });
  if (result.errors.length) throw new Error(result.errors.map((e) => e.text).join('\n'));
  const built: Record<string, Bundle> = {};
  for (const [out, meta] of Object.entries(result.metafile!.outputs)) {
    if (!out.endsWith('.mjs')) continue;
    built[relative(dir, join(PROJECT_ROOT, out)).replace(/\.mjs$/, '')] = {
      file: join(PROJECT_ROOT, out),
      bytes: meta.bytes,
      inputs: Object.keys(meta.inputs),
      externalImports: [...new Set(meta.imports.filter((i) => i.external).map((i) => i.path))],
    };
  }
  const inputs = Object.keys(result.metafile!.inputs);
  const hashes = await Promise.all(inputs.map(contentHash));
  if (hashes.every((h) => h !== undefined)) {
    // Written beside the entry and renamed into place: a run at the same time never reads half an entry.
    const partial = `${cacheDir}.${process.pid}.${Date.now()}`;
    mkdirSync(partial, { recursive: true });
    for (const [name, b] of Object.entries(built)) copyFileSync(b.file, join(partial, `${name}.mjs`));
    const manifest: CacheManifest = {
      inputs: Object.fromEntries(inputs.map((path, i) => [path, hashes[i]!])),
      bundles: Object.fromEntries(Object.entries(built).map(([name, { file: _file, ...b }]) => [name, b])),
    };
    writeFileSync(join(partial, 'manifest.json'), JSON.stringify(manifest));
    rmSync(cacheDir, { recursive: true, force: true });
    try {
      renameSync(partial, cacheDir);
    } catch {
      // Another run put its entry there first: the same bundles.
      rmSync(partial, { recursive: true, force: true });
    }
  }
  return built;
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
  /** IAM refused it: what was not allowed (`dynamodb:PutItem on arn:... for keys org#...`). */
  denied?: string;
}

export interface AwsStandInOptions {
  /** Access key id -> what that function's role allows: a call its role does not allow is refused as IAM refuses it. */
  principals: Map<string, readonly AllowStatement[]>;
  /** The template's tables (placeholder names), to find each request's partition keys. */
  tables: readonly StackTable[];
  /** ARNs of the template's secrets: each answers a generated value, as the stack generates one. */
  secrets: readonly string[];
}

/** The placeholder ARN a table's `Fn::GetAtt Arn` becomes (placeholderOf). */
const tableArn = (name: string) => `arn:aws:placeholder:${PLACEHOLDER_REGION}:${ACCOUNT}:${name}`;

/**
 * The AWS endpoint the bundles are pointed at (AWS_ENDPOINT_URL). Every call is first authorized as IAM
 * would, against the calling function's role (the access key id in its signature names the function):
 * one its role does not allow is answered AccessDeniedException and recorded as denied. Then DynamoDB's
 * calls go on to a real dynalite; Secrets Manager answers the stack's secrets (ResourceNotFound for
 * others, as for an upstream key nobody stored); KMS signs and gives the public key of a P-256 key made
 * here, as the stack's signing key does; anything else is recorded and refused.
 * The SDKs stay inside the bundles, as they ship, so they are stood in for on the wire, not mocked.
 * dynalite has no TransactWriteItems: those run through the project's emulation of it
 * (dynalite-transactions.ts), from the request as DynamoDB receives it.
 */
export async function startAwsStandIn(dynamo: DynaliteTable, options: AwsStandInOptions): Promise<{ endpoint: string; calls: AwsCall[]; close(): Promise<void> }> {
  const dynamoEndpoint = dynamo.endpoint;
  const { createServer, request } = await import('node:http');
  const emulation = await emulateTransactions(dynamo);
  // A TransactWriteItems request as DynamoDB gets it, run by the emulation; the answer as DynamoDB gives it.
  const documents = DynamoDBDocumentClient.from(dynamo.client);
  const transact = transactFromWire(documents);
  const signingKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const secretValues = new Map(options.secrets.map((arn) => [arn, randomBytes(32).toString('hex')]));
  const calls: AwsCall[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const accessKeyId = /Credential=([^/]+)\//.exec(String(req.headers.authorization ?? ''))?.[1] ?? 'unsigned';
      const target = req.headers['x-amz-target'] as string | undefined;
      const call: AwsCall = { accessKeyId, operation: target ?? `${req.method} ${req.url}` };
      calls.push(call);
      const json = target?.startsWith('DynamoDB_') ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1';
      const answer = (status: number, body: object) => {
        res.writeHead(status, { 'content-type': json });
        res.end(JSON.stringify(body));
      };
      const bytes = Buffer.concat(chunks);
      let input: Record<string, any> = {};
      try {
        if (target) input = JSON.parse(bytes.toString('utf8') || '{}');
      } catch {
        return answer(400, { __type: 'SerializationException', message: 'not JSON' });
      }
      const statements = options.principals.get(accessKeyId);
      const refused = (target ? authorizations(target, input, options.tables) : []).find((n) => !statements || !allows(statements, n));
      if (refused) {
        call.denied = `${refused.action} on ${refused.resource}${refused.leadingKeys ? ` for keys ${refused.leadingKeys.join(', ')}` : ''}`;
        return answer(400, { __type: 'AccessDeniedException', message: `User: ${accessKeyId} is not authorized to perform: ${call.denied}` });
      }
      if (target === 'DynamoDB_20120810.TransactWriteItems') {
        void transact(bytes).then(({ status, answer: body }) => answer(status, body));
        return;
      }
      if (target?.startsWith('DynamoDB_')) {
        const forward = request(`${dynamoEndpoint}${req.url}`, { method: req.method, headers: req.headers }, (out) => {
          res.writeHead(out.statusCode ?? 500, out.headers);
          out.pipe(res);
        });
        forward.on('error', () => res.destroy());
        forward.end(bytes);
        return;
      }
      if (target === 'secretsmanager.GetSecretValue') {
        const value = secretValues.get(input.SecretId);
        if (value === undefined) return answer(400, { __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." });
        return answer(200, { ARN: input.SecretId, Name: String(input.SecretId).split(':').pop(), SecretString: value, VersionId: 'version-1', VersionStages: ['AWSCURRENT'] });
      }
      if (target === 'TrentService.GetPublicKey') {
        const publicKey = signingKey.publicKey.export({ format: 'der', type: 'spki' }).toString('base64');
        return answer(200, { KeyId: input.KeyId, PublicKey: publicKey, KeySpec: 'ECC_NIST_P256', KeyUsage: 'SIGN_VERIFY', SigningAlgorithms: ['ECDSA_SHA_256'] });
      }
      if (target === 'TrentService.Sign' && input.MessageType === 'RAW' && input.SigningAlgorithm === 'ECDSA_SHA_256') {
        // DER, as KMS returns it.
        const signature = sign('sha256', Buffer.from(input.Message, 'base64'), signingKey.privateKey).toString('base64');
        return answer(200, { KeyId: input.KeyId, Signature: signature, SigningAlgorithm: 'ECDSA_SHA_256' });
      }
      answer(400, { __type: 'StandInRefused', message: 'not stood in for by this test' });
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

type WireItem = Record<string, { S?: string }>;

/**
 * What IAM authorizes for one JSON-protocol request: DynamoDB's per table (or index) with the partition
 * keys it touches (a transaction's items each as their own action), Secrets Manager's on the secret,
 * KMS's on the key. Other services' requests are not authorized here: the stand-in refuses them anyway.
 */
export function authorizations(target: string, input: Record<string, any>, tables: readonly StackTable[]): Authorization[] {
  const [prefix, operation] = target.split('.');
  if (prefix === 'secretsmanager') {
    // IAM sees a secret's full ARN, which ends in six random characters after its name.
    const id = String(input.SecretId);
    return [{ action: `secretsmanager:${operation}`, resource: id.startsWith('arn:') ? id : `arn:aws:secretsmanager:${PLACEHOLDER_REGION}:${ACCOUNT}:secret:${id}-AbCdEf` }];
  }
  if (prefix === 'TrentService') return [{ action: `kms:${operation}`, resource: String(input.KeyId) }];
  if (!prefix.startsWith('DynamoDB_')) return [];
  const table = (name: string) => {
    const t = tables.find((x) => x.logicalId === name);
    if (!t) throw new Error(`a DynamoDB request names table ${name}, which the template does not hold`);
    return t;
  };
  const leading = (name: string, item: WireItem | undefined) => [String(item?.[table(name).partitionKey]?.S)];
  const one = (action: string, name: string, item?: WireItem): Authorization => ({ action: `dynamodb:${action}`, resource: tableArn(name), leadingKeys: leading(name, item) });
  switch (operation) {
    case 'GetItem':
    case 'DeleteItem':
    case 'UpdateItem':
      return [one(operation, input.TableName, input.Key)];
    case 'PutItem':
      return [one(operation, input.TableName, input.Item)];
    case 'Query': {
      const t = table(input.TableName);
      const key = input.IndexName ? t.indexes[input.IndexName] : t.partitionKey;
      if (!key) throw new Error(`a query names index ${input.IndexName} of ${t.logicalId}, which the template does not hold`);
      // `#name = :value` on the partition key (the name maybe given plainly).
      const names = (input.ExpressionAttributeNames ?? {}) as Record<string, string>;
      const values: string[] = [];
      for (const m of String(input.KeyConditionExpression ?? '').matchAll(/(#?\w+)\s*=\s*(:\w+)/g)) {
        if ((names[m[1]] ?? m[1]) === key) values.push(String(input.ExpressionAttributeValues?.[m[2]]?.S));
      }
      return [{ action: 'dynamodb:Query', resource: input.IndexName ? `${tableArn(t.logicalId)}/index/${input.IndexName}` : tableArn(t.logicalId), leadingKeys: values }];
    }
    case 'Scan':
      return [{ action: 'dynamodb:Scan', resource: input.IndexName ? `${tableArn(input.TableName)}/index/${input.IndexName}` : tableArn(input.TableName) }];
    case 'BatchGetItem':
      return Object.entries(input.RequestItems as Record<string, { Keys: WireItem[] }>).map(([name, r]) => ({
        action: 'dynamodb:BatchGetItem',
        resource: tableArn(name),
        leadingKeys: r.Keys.flatMap((k) => leading(name, k)),
      }));
    case 'BatchWriteItem':
      return Object.entries(input.RequestItems as Record<string, { PutRequest?: { Item: WireItem }; DeleteRequest?: { Key: WireItem } }[]>).map(([name, writes]) => ({
        action: 'dynamodb:BatchWriteItem',
        resource: tableArn(name),
        leadingKeys: writes.flatMap((w) => leading(name, w.PutRequest?.Item ?? w.DeleteRequest?.Key)),
      }));
    case 'TransactWriteItems':
      return (input.TransactItems as Record<string, { TableName: string; Key?: WireItem; Item?: WireItem }>[]).map((w) => {
        const [kind, op] = Object.entries(w)[0];
        const action = ({ Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem', ConditionCheck: 'ConditionCheckItem' } as Record<string, string>)[kind];
        return one(action, op.TableName, op.Item ?? op.Key);
      });
    case 'TransactGetItems':
      return (input.TransactItems as { Get: { TableName: string; Key: WireItem } }[]).map((g) => one('GetItem', g.Get.TableName, g.Get.Key));
    default:
      return [{ action: `dynamodb:${operation}`, resource: tableArn(String(input.TableName)) }];
  }
}
