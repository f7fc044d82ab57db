/**
 * `npm run deploy:localstack [-- <cdk deploy options>]`: deploys the stack to the LocalStack answering
 * at AWS_ENDPOINT_URL (default http://localhost:4566), with the project's own CDK CLI pointed there
 * (docs/deploying.md, "LocalStack").
 *
 * First it asks LocalStack's `/_localstack/health`: when nothing answers, it exits 1 at once with one
 * line saying what is missing and how to start LocalStack, never a stack trace. When LocalStack
 * answers, it names the stack's services the answer does not list as available (not reported by this
 * LocalStack: a plan, a SERVICES list or a version can leave them out), then runs `cdk bootstrap` and `cdk deploy --all` with dummy credentials
 * (`test` / `test`, account 000000000000) in AWS_REGION (default us-east-1). Options after `--` go to
 * `cdk deploy`, e.g. `-- --parameters AlarmEmail=ops@example.com`.
 *
 * `--check-only`: stops after the health check (exit 0 when LocalStack answers), for tests and for
 * a quick "is it up" before a long deploy. `--help` / `-h`: prints the usage and exits 0.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const DEFAULT_ENDPOINT = 'http://localhost:4566';
export const DEFAULT_REGION = 'us-east-1';
/** LocalStack's account for the access key `test`. */
export const LOCALSTACK_ACCOUNT = '000000000000';
/** A health answer takes milliseconds; an endpoint that accepts and never answers is not LocalStack. */
const HEALTH_TIMEOUT_MS = 5_000;
// LocalStack runs Lambda functions in containers of its own, through the host's Docker socket.
const DOCKER_RUN = 'docker run --rm -d -p 4566:4566 -e LOCALSTACK_AUTH_TOKEN -v /var/run/docker.sock:/var/run/docker.sock localstack/localstack';
const START_HINT = `start it with \`${DOCKER_RUN}\` (or \`localstack start -d\`), or set AWS_ENDPOINT_URL to where it runs`;

export const USAGE = `usage: npm run deploy:localstack [-- --check-only | --help | <cdk deploy options>]

Deploys the stack to the LocalStack at AWS_ENDPOINT_URL (default ${DEFAULT_ENDPOINT}): asks its
/_localstack/health, names the stack's services it does not report, then runs \`cdk bootstrap\` and
\`cdk deploy --all --require-approval never\` with the dummy credentials test / test (account
${LOCALSTACK_ACCOUNT}) in AWS_REGION (default ${DEFAULT_REGION}).

  --check-only     stop after the health check (exit 0 when LocalStack answers)
  --help, -h       print this and exit
  anything else    passed to \`cdk deploy\`, e.g. -- --parameters AlarmEmail=dev@example.com

Start LocalStack (it needs the Docker socket to run Lambda functions):
  ${DOCKER_RUN}

More: docs/deploying.md, section 8.
`;

/** The services the stack's resources use, by the names LocalStack's health answer gives them. */
export const STACK_SERVICES = [
  'cloudformation', 's3', 'iam', 'sts', 'ssm', 'lambda', 'dynamodb', 'sqs', 'sns', 'events', 'logs', 'cloudwatch', 'kms', 'secretsmanager', 'apigateway', 'cloudfront',
] as const;

/** Thrown for what the user can fix: printed as one line, exit code 1. */
export class DeployError extends Error {}

interface Health {
  services?: Record<string, string>;
  edition?: string;
  version?: string;
}

/** Asks `/_localstack/health`; a DeployError says what is missing when LocalStack does not answer. */
export async function checkLocalStack(endpoint: string, timeoutMs = HEALTH_TIMEOUT_MS): Promise<Health> {
  let url: URL;
  try {
    url = new URL('/_localstack/health', endpoint);
  } catch {
    throw new DeployError(`AWS_ENDPOINT_URL is not a URL: ${JSON.stringify(endpoint)}; unset it for ${DEFAULT_ENDPOINT}`);
  }
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    throw new DeployError(`no LocalStack answers at ${endpoint} (${reasonOf(error, timeoutMs)}): ${START_HINT}`);
  }
  const body = await res.text().catch(() => '');
  let health: Health | undefined;
  try {
    health = JSON.parse(body) as Health;
  } catch {
    health = undefined;
  }
  if (!res.ok || !health || typeof health.services !== 'object' || health.services === null) {
    throw new DeployError(`${endpoint} answers, but not as LocalStack (GET /_localstack/health: ${res.status}, no service list): ${START_HINT}`);
  }
  return health;
}

const NETWORK_REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
};

function reasonOf(error: unknown, timeoutMs: number): string {
  const e = error as { name?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return `no answer within ${timeoutMs / 1000} s`;
  const code = e?.cause?.code;
  if (code && code in NETWORK_REASONS) return NETWORK_REASONS[code];
  return code ?? e?.cause?.message ?? String((error as Error)?.message ?? error);
}

/** The stack's services the health answer does not list as available or running. */
export function missingServices(health: Health): string[] {
  const services = health.services ?? {};
  return STACK_SERVICES.filter((name) => !['available', 'running'].includes(services[name] ?? ''));
}

/**
 * The environment the CDK CLI runs with: every AWS call to LocalStack, as LocalStack's account. For
 * `localhost`, S3 (the assets' upload) goes to 127.0.0.1: the SDK addresses a bucket as
 * `<bucket>.<host>`, which `localhost` does not resolve, but puts it in the path for an IP address.
 */
export function localStackEnv(endpoint: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || DEFAULT_REGION;
  const out: NodeJS.ProcessEnv = {
    ...env,
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
    CDK_DEFAULT_ACCOUNT: LOCALSTACK_ACCOUNT,
    CDK_DEFAULT_REGION: region,
  };
  // A profile or a session token would take the place of the dummy credentials.
  delete out.AWS_PROFILE;
  delete out.AWS_SESSION_TOKEN;
  const { protocol, hostname, port } = new URL(endpoint);
  if (!env.AWS_ENDPOINT_URL_S3 && hostname === 'localhost') out.AWS_ENDPOINT_URL_S3 = `${protocol}//127.0.0.1${port ? `:${port}` : ''}`;
  return out;
}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Runs the project's CDK CLI; a DeployError names the step that failed (its output is above). */
function cdk(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(ROOT, 'node_modules', '.bin', 'cdk'), args, { cwd: ROOT, env, stdio: 'inherit' });
    child.on('error', (error) => reject(new DeployError(`cannot run the CDK CLI (${(error as NodeJS.ErrnoException).code ?? error.message}): run \`npm ci\` first`)));
    child.on('exit', (code, signal) => (code === 0 ? resolve() : reject(new DeployError(`\`cdk ${args[0]}\` failed (${signal ?? `exit code ${code}`}); its output is above`))));
  });
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) return void process.stdout.write(USAGE);
  const checkOnly = argv.includes('--check-only');
  const deployArgs = argv.filter((a) => a !== '--check-only');
  const endpoint = process.env.AWS_ENDPOINT_URL || DEFAULT_ENDPOINT;

  const health = await checkLocalStack(endpoint);
  const missing = missingServices(health);
  const edition = [health.edition, health.version].filter(Boolean).join(' ');
  say(`LocalStack${edition ? ` ${edition}` : ''} answers at ${endpoint}`);
  if (missing.length) {
    // The answer says what runs, not why (a plan, a SERVICES list, a version): no claim about plans.
    say(`not reported by this LocalStack: ${missing.join(', ')}: the resources using them may fail to deploy or not work (docs/deploying.md, section 8, lists what each plan has)`);
  }
  if (checkOnly) return;

  const env = localStackEnv(endpoint, process.env);
  await cdk(['bootstrap', `aws://${LOCALSTACK_ACCOUNT}/${env.AWS_REGION}`], env);
  await cdk(['deploy', '--all', '--require-approval', 'never', ...deployArgs], env);
  say(`deployed to LocalStack at ${endpoint}; the outputs are above (docs/deploying.md says what each serves)`);
}

const say = (line: string) => process.stdout.write(`deploy:localstack: ${line}\n`);

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    // One readable line: what is wrong and what to do, never a stack trace.
    const message = error instanceof DeployError ? error.message : `failed: ${String((error as Error)?.message ?? error)}`;
    process.stderr.write(`deploy:localstack: ${message}\n`);
    process.exit(1);
  });
}
