/**
 * Every environment setting, read in this one module: its variable, its default, what it does, and a
 * check. A bad value stops the start with a message naming the variable, instead of silently
 * turning a feature off (`Number('abc')` is NaN, and a NaN cache lifetime caches nothing).
 * The local server validates at start (bin/local.ts); a Lambda function at its cold start
 * (http/handler.ts). Tests override values with useSettings().
 */
import { availableParallelism } from 'node:os';

/**
 * A setting's check: the value from its text, or a SettingCheckError saying what is wrong. Plain
 * functions, not a schema library: every function reads its settings at its cold start, and a Lambda
 * function that validates no body then loads no validation library at all (docs/decisions/lambda-bundles.md).
 */
type Check<T> = (text: string) => T;

class SettingCheckError extends Error {}
const refuse = (message: string): never => {
  throw new SettingCheckError(message);
};

const wholeNumber =
  (min: number, max: number): Check<number> =>
  (text) => {
    if (!/^\d{1,15}$/.test(text)) refuse('must be a whole number');
    const n = Number(text);
    if (n < min) refuse(`must be at least ${min}`);
    if (n > max) refuse(`must be at most ${max}`);
    return n;
  };

const oneOf =
  <const T extends string>(values: readonly T[]): Check<T> =>
  (text) =>
    (values as readonly string[]).includes(text) ? (text as T) : refuse(`expected one of ${values.map((v) => JSON.stringify(v)).join('|')}`);

const nonEmpty: Check<string> = (text) => text;

const isUrl = (text: string) => {
  try {
    return Boolean(new URL(text));
  } catch {
    return false;
  }
};
const url: Check<string> = (text) => (isUrl(text) ? text : refuse('must be a URL'));

const matching =
  (pattern: RegExp, message: string): Check<string> =>
  (text) =>
    pattern.test(text) ? text : refuse(message);

const jsonOf =
  <T>(check: (value: unknown) => T): Check<T> =>
  (text) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return refuse('must be JSON');
    }
    return check(value);
  };

/** `{name: url, ...}` */
const urlsByName = (value: unknown): Record<string, string> => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return refuse('expected an object of name to URL');
  for (const [name, u] of Object.entries(value)) if (typeof u !== 'string' || !isUrl(u)) refuse(`${name}: must be a URL`);
  return value as Record<string, string>;
};

/** `["a", ...]`: at least one non-empty string. */
const nonEmptyStrings = (value: unknown): string[] => {
  if (!Array.isArray(value)) return refuse(`expected array, received ${value === null ? 'null' : typeof value}`);
  if (value.length < 1) refuse('expected array to have >=1 items');
  if (!value.every((v) => typeof v === 'string' && v.length > 0)) refuse('expected non-empty strings');
  return value as string[];
};

interface Definition<T> {
  env: string;
  doc: string;
  check: Check<T>;
  /** The value when the variable is unset or empty; undefined: none (the setting is optional). */
  fallback: () => T | undefined;
}

const define = <T>(env: string, check: Check<T>, fallback: T | (() => T) | undefined, doc: string): Definition<T> => ({
  env,
  doc,
  check,
  fallback: typeof fallback === 'function' ? (fallback as () => T) : () => fallback,
});

/** Most local workers by default: past this, more processes only add SQLite writers contending for one file. */
const MAX_DEFAULT_WORKERS = 4;

/**
 * The default LOCAL_WORKERS: one process on a machine of 2 cores or fewer, else the cores (at most
 * 4). Every process on the SQLite file pays for the others' commits (its page cache is dropped after
 * each, and it waits for their write lock): on 2 vCPUs a second process cost 1.3-1.8x the CPU of a
 * request and lost on creates and event delivery, winning only lists while a core was idle
 * (`npm run bench -- --workers 1,2`, 2026-11-27; docs/decisions/local-runtime.md).
 */
export const defaultLocalWorkers = (cores = availableParallelism()) => (cores <= 2 ? 1 : Math.min(cores, MAX_DEFAULT_WORKERS));

export interface Settings {
  engine: 'embedded' | 'aws';
  dataDir: string;
  tableName?: string;
  bucketName?: string;
  vectorBucketName?: string;
  queueUrls?: Record<string, string>;
  connectionsEndpoint?: string;
  connectionsTable?: string;
  signingKeyIds?: string[];
  serverSecretArn?: string;
  s3ForcePathStyle?: boolean;
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent';
  credentialCacheMs: number;
  modelRoutesCacheMs: number;
  eventsRateLimitPerMinute: number;
  eventsAllowLoopbackWebhooks?: boolean;
  awsEndpointUrl?: string;
  dataRateLimitPerMinute: number;
  collectionRetentionSeconds: number;
  knowledgeLeaseSeconds: number;
  collectionIndexSweepSeconds: number;
  uploadCheckWithinMs: number;
  fileFormIdleMs: number;
  ffmpegPath: string;
  localWorkers: number;
  backgroundWorkers: number;
  knowledgeMaxMemoryMb: number;
  knowledgeMaxCpuSeconds: number;
  knowledgeMaxQueuedItems: number;
  knowledgeJobTranscriptionConcurrency: number;
  knowledgeJobStepBudgetMs: number;
  backlogDegradedSeconds: number;
  aiPort: number;
  dataPort: number;
  eventsPort: number;
  opsPort: number;
  consolePort: number;
  consoleUrl?: string;
  consoleOriginVerify?: string;
  consoleAllowLoopbackUpstreams?: boolean;
  cdkDefaultAccount?: string;
  cdkDefaultRegion?: string;
}

export const DEFINITIONS: { [K in keyof Settings]-?: Definition<NonNullable<Settings[K]>> } = {
  engine: define(
    'ENGINE',
    oneOf(['embedded', 'aws']),
    'embedded',
    '`embedded` (SQLite, files; the default) or `aws` (set by the stack on every function). `ENGINE=aws npm start` serves over DynamoDB and S3 (`TABLE_NAME`, `BUCKET_NAME`, in AWS or an emulator at `AWS_ENDPOINT_URL`), keeping each other port whose setting is unset, and its development credentials, in `DATA_DIR/aws-<TABLE_NAME>` (docs/decisions/aws-engine-emulators.md).',
  ),
  dataDir: define('DATA_DIR', nonEmpty, '.platform', 'embedded: the directory of the SQLite database, blobs and keys.'),
  tableName: define('TABLE_NAME', nonEmpty, undefined, 'aws: the DynamoDB table.'),
  bucketName: define('BUCKET_NAME', nonEmpty, undefined, 'aws: the S3 bucket of blobs.'),
  vectorBucketName: define(
    'VECTOR_BUCKET_NAME',
    matching(/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/, 'must be a vector bucket name: 3 to 63 lowercase letters, digits and hyphens'),
    undefined,
    "aws: the S3 Vectors vector bucket holding the vector databases' indexes (functions granted `vectors:read` or `vectors:write`). `ENGINE=aws npm start` without it keeps the embedded engine's vector index.",
  ),
  queueUrls: define('QUEUE_URLS', jsonOf(urlsByName), undefined, 'aws: JSON object, queue name (engine/queues.ts) -> SQS queue URL.'),
  connectionsEndpoint: define('CONNECTIONS_ENDPOINT', url, undefined, 'aws: https endpoint of the WebSocket API stage (API Gateway Management API).'),
  connectionsTable: define('CONNECTIONS_TABLE', nonEmpty, undefined, 'aws: the DynamoDB table of open WebSocket connections (what each serves).'),
  signingKeyIds: define('SIGNING_KEY_IDS', jsonOf(nonEmptyStrings), undefined, 'aws: JSON array of the KMS keys that sign and verify tokens, current first.'),
  serverSecretArn: define('SERVER_SECRET_ARN', matching(/^arn:aws[a-z-]*:secretsmanager:/, 'must be a Secrets Manager secret ARN'), undefined, 'aws: the Secrets Manager secret that cursor keys derive from (routes that give out cursors).'),
  // Optional, as the loopback flag below: unset is the SDK's own choice (virtual-hosted, path-style for an IP endpoint).
  s3ForcePathStyle: define(
    'S3_FORCE_PATH_STYLE',
    (text) => oneOf(['0', '1'])(text) === '1',
    undefined,
    'aws: `1` addresses the bucket in the path (`<endpoint>/<bucket>/<key>`), not in the host name: what an S3 emulator at `AWS_ENDPOINT_URL_S3` needs (s3rver, LocalStack, MinIO; docs/decisions/aws-engine-emulators.md). Unset on a deployed stack.',
  ),
  logLevel: define('LOG_LEVEL', oneOf(['debug', 'info', 'warn', 'error', 'silent']), 'info', 'Least level logged; `silent` logs nothing.'),
  credentialCacheMs: define(
    'CREDENTIAL_CACHE_MS',
    wholeNumber(0, 60_000),
    30_000,
    'How long a resolved credential is cached, in ms. At most a minute: spec 5 rule 5 wants a revoked credential refused within one.',
  ),
  modelRoutesCacheMs: define('MODEL_ROUTES_CACHE_MS', wholeNumber(0, 60_000), 1000, 'How long an organization\'s model routes are cached, in ms.'),
  eventsRateLimitPerMinute: define('EVENTS_RATE_LIMIT_PER_MINUTE', wholeNumber(0, 1_000_000), 600, 'Events API calls a minute per credential (spec 8: 600); 0 turns it off.'),
  // Optional (unset means off) rather than a `false` default: only someone who sets it gets it.
  eventsAllowLoopbackWebhooks: define(
    'EVENTS_ALLOW_LOOPBACK_WEBHOOKS',
    (text) => oneOf(['0', '1'])(text) === '1',
    undefined,
    'Local development only: `1` lets webhook URLs `http(s)://127.0.0.1:<port>`, `[::1]` and `localhost` through (any port); unset or `0` (off) refuses them as every other private destination (docs/events/webhook-destinations.md). Never set it on a deployed stack.',
  ),
  awsEndpointUrl: define(
    'AWS_ENDPOINT_URL',
    url,
    undefined,
    'An EventBridge-compatible endpoint for subscriptions delivering to an event bus (docs/events/eventbridge.md); the local server refuses such subscriptions without it. The AWS SDK reads it too, for every client of the `aws` engine, as it reads `AWS_ENDPOINT_URL_<SERVICE>` (`_DYNAMODB`, `_S3`, `_SQS`, `_KMS`, `_SECRETS_MANAGER`), which wins for its service: how the engine runs on an emulator (docs/decisions/aws-engine-emulators.md). Unset on a deployed stack.',
  ),
  dataRateLimitPerMinute: define('DATA_RATE_LIMIT_PER_MINUTE', wholeNumber(0, 1_000_000), 0, 'Data API calls a minute per credential; 0 (the default, as PocketBase) is no limit.'),
  collectionRetentionSeconds: define(
    'COLLECTION_RETENTION_S',
    wholeNumber(1, 30 * 24 * 3600),
    30 * 24 * 3600,
    'Development only: how long a knowledge collection lives, in seconds (default and most: 30 days, the `standard_30d` retention), so expiry can be tried from outside (docs/ai/collections.md). Never set it on a deployed stack.',
  ),
  ffmpegPath: define(
    'FFMPEG_PATH',
    nonEmpty,
    'ffmpeg',
    "The `ffmpeg` program that takes a recording's audio track out before transcription (a name looked up on `PATH`, or a path); `ffprobe` is taken from the same directory. Without it, a recording is sent as it is when the transcription API takes its format and it is at most 25 MB, else its item fails `unsupported_type` (docs/ai/collections.md).",
  ),
  knowledgeLeaseSeconds: define(
    'KNOWLEDGE_LEASE_S',
    wholeNumber(2, 900),
    120,
    'How long a collection item may be processed without a sign of life before the processing sweep sends it to another processor (docs/ai/collections.md, "Processing"); renewed every third of it while processing runs. A knowledge job\'s step holds its job 60 s, or this when lower (docs/ai/knowledge-jobs.md, "Crashes"). Lower it only to try crash recovery.',
  ),
  collectionIndexSweepSeconds: define(
    'COLLECTION_INDEX_SWEEP_S',
    wholeNumber(1, 30 * 24 * 3600),
    24 * 3600,
    "How often each workspace vector index holding cloud collections' chunks is read through for entries no item serves any more (a processor that died while its item was deleted leaves them), in seconds: a pass starts at most this often per index (default a day; docs/decisions/knowledge-index-sweep.md). Lower it only to try the sweep.",
  ),
  uploadCheckWithinMs: define(
    'UPLOAD_CHECK_WITHIN_MS',
    wholeNumber(0, 25_000),
    20_000,
    "How long `POST /v1/uploads/{id}/complete` waits for its SHA-256 check, in ms, before answering `202` (`verifying`) and leaving the check to the upload-checks queue's consumer (docs/decisions/upload-checks.md). At most 25 s: under API Gateway's 29 s; lower it only to try the hand-over.",
  ),
  fileFormIdleMs: define(
    'FILE_FORM_IDLE_MS',
    wholeNumber(100, 300_000),
    30_000,
    "How long `POST /v1/files` waits for the next bytes of its form, in ms, before it refuses the form (`400 invalid_body`) and frees its spool slot: a client that stalls holds no slot an organization needs (docs/decisions/openai-files.md).",
  ),
  localWorkers: define(
    'LOCAL_WORKERS',
    wholeNumber(1, 64),
    () => defaultLocalWorkers(),
    '`npm start`: processes serving the APIs (default: 1 on 2 cores or fewer, else the cores, at most 4); 1 serves them in one process.',
  ),
  backgroundWorkers: define(
    'BACKGROUND_WORKERS',
    wholeNumber(1, 16),
    1,
    '`npm start`: processes running the queue consumers and sweeps (knowledge items, jobs, webhook deliveries, the sweeps), apart from the processes serving the APIs and at a lower CPU priority (default 1; docs/decisions/background-processes.md).',
  ),
  knowledgeMaxMemoryMb: define(
    'KNOWLEDGE_MAX_MEMORY_MB',
    wholeNumber(128, 65_536),
    1024,
    "The memory one item's extraction may use, in MiB: it runs in a child process of its own, killed past this, and the item fails `too_large` (docs/decisions/background-processes.md).",
  ),
  knowledgeMaxCpuSeconds: define(
    'KNOWLEDGE_MAX_CPU_S',
    wholeNumber(1, 3600),
    60,
    "The CPU time one item's extraction may use, in seconds: its child process is killed past this, and the item fails `too_large`.",
  ),
  knowledgeMaxQueuedItems: define(
    'KNOWLEDGE_MAX_QUEUED_ITEMS',
    wholeNumber(1, 1_000_000),
    500,
    'Items an organization may have queued or processing at once, over all its collections; past it, adding an item answers `429 rate_limited` with `Retry-After` (docs/decisions/knowledge-fairness.md).',
  ),
  knowledgeJobTranscriptionConcurrency: define(
    'KNOWLEDGE_JOB_TRANSCRIPTION_CONCURRENCY',
    wholeNumber(1, 64),
    4,
    "A knowledge job's transcription pieces (10 minutes of audio each) sent to the transcription route at once, each a message of its own (docs/ai/knowledge-jobs.md).",
  ),
  knowledgeJobStepBudgetMs: define(
    'KNOWLEDGE_JOB_STEP_BUDGET_MS',
    wholeNumber(1, 3_600_000),
    600_000,
    "How long one run of a knowledge job's step starts new calls, in ms: past it the step stores what it has and sends itself again, so no run nears Lambda's 15 minutes (default 10 minutes; lower it only to try the resumption).",
  ),
  backlogDegradedSeconds: define(
    'BACKLOG_DEGRADED_S',
    wholeNumber(1, 86_400),
    300,
    '`npm start`: `GET /readyz` says `degraded` (still 200) when the oldest waiting background message has waited longer than this, in seconds.',
  ),
  aiPort: define('AI_PORT', wholeNumber(0, 65_535), 8080, '`npm start`: the AI API\'s port (0 picks a free one).'),
  dataPort: define('DATA_PORT', wholeNumber(0, 65_535), 8081, '`npm start`: the Data API\'s port.'),
  eventsPort: define('EVENTS_PORT', wholeNumber(0, 65_535), 8082, '`npm start`: the Events API\'s port.'),
  opsPort: define('OPS_PORT', wholeNumber(0, 65_535), 8083, '`npm start`: the operations port, for process managers and readers: `GET /healthz` (the process runs), `GET /readyz` (the store answers), the OpenAPI documents at `GET /openapi/{ai,data,events}.json` and their reference page at `GET /docs`.'),
  consolePort: define('CONSOLE_PORT', wholeNumber(0, 65_535), 8084, "`npm start`: the console's port: its pages and the console API (`/console/api/…`; docs/console.md)."),
  consoleUrl: define(
    'CONSOLE_URL',
    url,
    undefined,
    "The console's address as people's browsers reach it: invitation links are made from it (`<CONSOLE_URL>/invite#<token>`, `org invite` included), its origin is the one the console API takes state-changing calls from, and its cookies are Secure unless it is plain http on a loopback address. Unset: `http://127.0.0.1:<CONSOLE_PORT>` (the local server's own).",
  ),
  consoleOriginVerify: define(
    'CONSOLE_ORIGIN_VERIFY',
    matching(/^[A-Za-z0-9]{32,256}$/, 'must be 32 to 256 letters and digits'),
    undefined,
    "aws (set by the stack from a generated Secrets Manager secret): the value CloudFront sends in the console API origin's `x-console-origin-verify` header; a console API request without it is `403 forbidden`, so only calls through the console's distribution are served (docs/decisions/console-aws.md). Unset (the local server): no such check.",
  ),
  // Optional (unset means off), as EVENTS_ALLOW_LOOPBACK_WEBHOOKS: only someone who sets it gets it.
  consoleAllowLoopbackUpstreams: define(
    'CONSOLE_ALLOW_LOOPBACK_UPSTREAMS',
    (text) => oneOf(['0', '1'])(text) === '1',
    undefined,
    'Local development only: `1` lets a model route\'s or rerank profile\'s `base_url` set from the console be `http(s)://127.0.0.1`, `[::1]` or `localhost` (any port; a local model server); unset or `0` refuses them as every other private destination (docs/decisions/console-upstream-destinations.md). The admin CLI is never limited. Never set it on a deployed stack.',
  ),
  cdkDefaultAccount: define('CDK_DEFAULT_ACCOUNT', nonEmpty, undefined, '`cdk synth`/`cdk deploy` (set by the CDK CLI from the credentials): the account the stack is synthesized for.'),
  cdkDefaultRegion: define(
    'CDK_DEFAULT_REGION',
    nonEmpty,
    undefined,
    '`cdk synth`/`cdk deploy` (set by the CDK CLI from `AWS_REGION` or the profile): the region the stack is synthesized for; without one, us-east-1. A named region because the Data distribution\'s Lambda@Edge relay lives in us-east-1 (docs/deploying.md).',
  ),
};

/** The variable of each setting, for whoever sets them (the CDK stack sets the `aws` ones). */
export const ENV = Object.fromEntries(Object.entries(DEFINITIONS).map(([key, d]) => [key, d.env])) as { [K in keyof Settings]-?: string };

export class SettingsError extends Error {
  override name = 'SettingsError';
}

/** Reads and checks every setting; throws a SettingsError naming each bad variable. */
export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, d] of Object.entries(DEFINITIONS) as [string, Definition<unknown>][]) {
    const raw = env[d.env];
    if (raw === undefined || raw === '') {
      const fallback = d.fallback();
      if (fallback !== undefined) out[key] = fallback;
      continue;
    }
    try {
      out[key] = d.check(raw);
    } catch (error) {
      if (!(error instanceof SettingCheckError)) throw error;
      problems.push(`${d.env}=${JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}…` : raw)}: ${error.message} (${d.doc})`);
    }
  }
  if (problems.length) throw new SettingsError(`Invalid settings:\n  ${problems.join('\n  ')}`);
  return out as unknown as Settings;
}

let current: Settings | undefined;

/** The process's settings, read and checked on first use. */
/**
 * An environment variable a model route names for its upstream API key (`route set --api-key-env`):
 * the one read of the environment outside the settings, by a name the operator chose.
 */
export function environmentValue(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value === '' ? undefined : value;
}

export function settings(): Settings {
  return (current ??= loadSettings());
}

/** Replaces some settings for this process (tests); `undefined` rereads the environment. */
export function useSettings(overrides?: Partial<Settings>): void {
  current = overrides === undefined ? undefined : { ...settings(), ...overrides };
}

/** The settings as documentation (docs/settings.md is generated from it by a test that keeps them equal). */
export function settingsTable(): string {
  const rows = Object.values(DEFINITIONS).map((d: Definition<unknown>) => {
    const fallback = d.env === 'LOCAL_WORKERS' ? 'cores, at most 4' : d.fallback();
    return `| \`${d.env}\` | ${fallback === undefined ? '(none)' : `\`${String(fallback)}\``} | ${d.doc} |`;
  });
  return ['| variable | default | what it does |', '|---|---|---|', ...rows].join('\n');
}
