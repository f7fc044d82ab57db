/**
 * `npm run deploy:localstack` as a user runs it, without a real deploy: with nothing at the endpoint it
 * stops at once with one readable line and a non-zero exit; with something answering LocalStack's
 * health check it gets past it (`--check-only` stops there) and names the services the stack needs
 * that the answer lacks. What it hands the CDK CLI is checked on its own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { checkLocalStack, DeployError, localStackEnv, LOCALSTACK_ACCOUNT, STACK_SERVICES } from '../../scripts/deploy-localstack.js';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'deploy-localstack.ts');

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the script as `npm run deploy:localstack` does (tsx), with AWS_ENDPOINT_URL set. */
function run(endpoint: string, ...args: string[]): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, ...args], {
      env: { ...process.env, AWS_ENDPOINT_URL: endpoint },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr, ms: Date.now() - started }));
  });
}

function listen(handler: RequestListener): Promise<Server> {
  return new Promise((resolve) => {
    const server = createServer(handler).listen(0, '127.0.0.1', () => resolve(server));
  });
}
const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

/** A port nothing listens on: one the OS just gave out and took back. */
async function closedPort(): Promise<string> {
  const server = await listen(() => undefined);
  const url = urlOf(server);
  await close(server);
  return url;
}

const noStackTrace = (text: string) => expect(text).not.toMatch(/^\s+at\s/m);

describe('npm run deploy:localstack', () => {
  let localStack: Server;
  let partial: Server;
  let notLocalStack: Server;
  const allAvailable = Object.fromEntries(STACK_SERVICES.map((s) => [s, 'available']));

  beforeAll(async () => {
    localStack = await listen((req, res) => {
      if (req.url !== '/_localstack/health') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ services: allAvailable, edition: 'community', version: '4.0.0' }));
    });
    partial = await listen((_req, res) => {
      const { cloudfront: _c, ...rest } = allAvailable;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ services: { ...rest, apigateway: 'disabled' } }));
    });
    notLocalStack = await listen((_req, res) => void res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'));
  });
  afterAll(async () => {
    await Promise.all([close(localStack), close(partial), close(notLocalStack)]);
  });

  it('exits non-zero at once when nothing answers, with one line saying what is missing and how to start LocalStack, no stack trace', async () => {
    const endpoint = await closedPort();
    const r = await run(endpoint);
    expect(r.status).toBe(1);
    expect(r.ms).toBeLessThan(15_000);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`no LocalStack answers at ${endpoint} (connection refused)`);
    expect(r.stderr).toMatch(/docker run .*localstack\/localstack/);
    // LocalStack runs Lambda functions in containers of its own: without the socket, no function runs.
    expect(r.stderr).toContain('-v /var/run/docker.sock:/var/run/docker.sock');
    noStackTrace(r.stderr);
  });

  it('says so when what answers is not LocalStack', async () => {
    const r = await run(urlOf(notLocalStack), '--check-only');
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('answers, but not as LocalStack (GET /_localstack/health: 404');
    noStackTrace(r.stderr);
  });

  it('refuses an endpoint that is not a URL in one line', async () => {
    const r = await run('not a url', '--check-only');
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe('deploy:localstack: AWS_ENDPOINT_URL is not a URL: "not a url"; unset it for http://localhost:4566');
  });

  it('gets past the check when LocalStack answers (--check-only stops there)', async () => {
    const r = await run(urlOf(localStack), '--check-only');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(`deploy:localstack: LocalStack community 4.0.0 answers at ${urlOf(localStack)}`);
  });

  it("names the stack's services the LocalStack answering lacks", async () => {
    const r = await run(urlOf(partial), '--check-only');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('not reported by this LocalStack: apigateway, cloudfront');
    // The health answer says what runs, not why: a service can be missing for a plan, a SERVICES list
    // or a LocalStack version, so the script does not claim a paid plan would bring it.
    expect(r.stdout).not.toMatch(/paid/i);
  });

  it.each(['--help', '-h'])('prints its usage for %s and exits 0 without asking any endpoint', async (flag) => {
    const endpoint = await closedPort();
    const r = await run(endpoint, flag);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^usage: npm run deploy:localstack/);
    expect(r.stdout).toContain('--check-only');
    expect(r.stdout).toContain('AWS_ENDPOINT_URL');
    expect(r.stdout).toContain('-v /var/run/docker.sock:/var/run/docker.sock');
    expect(r.stdout).not.toContain('no LocalStack answers');
  });

  it('gets --help through npm run, as the docs write it', async () => {
    const endpoint = await closedPort();
    const r = await new Promise<Run>((resolve, reject) => {
      const started = Date.now();
      const child = spawn('npm', ['run', '--silent', 'deploy:localstack', '--', '--help'], {
        cwd: join(import.meta.dirname, '..', '..'),
        env: { ...process.env, AWS_ENDPOINT_URL: endpoint },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', reject);
      child.on('close', (status) => resolve({ status, stdout, stderr, ms: Date.now() - started }));
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run deploy:localstack/);
  });
});

describe('the health check', () => {
  it('gives up on an endpoint that accepts and never answers, within its timeout (5 s in the script)', async () => {
    const silent = await listen(() => undefined);
    try {
      const started = Date.now();
      const failure = await checkLocalStack(urlOf(silent), 200).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(DeployError);
      expect((failure as Error).message).toContain(`no LocalStack answers at ${urlOf(silent)} (no answer within 0.2 s)`);
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      silent.closeAllConnections();
      await close(silent);
    }
  });
});

describe("the CDK CLI's environment", () => {
  it('sends every call to LocalStack with its dummy credentials, in us-east-1 unless AWS_REGION says otherwise', () => {
    const env = localStackEnv('http://localhost:4566', { AWS_PROFILE: 'prod', AWS_SESSION_TOKEN: 'real', PATH: '/bin' });
    expect(env).toMatchObject({
      AWS_ENDPOINT_URL: 'http://localhost:4566',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      AWS_REGION: 'us-east-1',
      CDK_DEFAULT_ACCOUNT: LOCALSTACK_ACCOUNT,
      CDK_DEFAULT_REGION: 'us-east-1',
      // An IP address: the SDK then puts the bucket in the path, not in a host name localhost lacks.
      AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:4566',
      PATH: '/bin',
    });
    expect(env).not.toHaveProperty('AWS_PROFILE');
    expect(env).not.toHaveProperty('AWS_SESSION_TOKEN');
    expect(localStackEnv('http://localhost:4566', { AWS_REGION: 'eu-west-1' }).CDK_DEFAULT_REGION).toBe('eu-west-1');
    expect(localStackEnv('http://localstack:4566', {})).not.toHaveProperty('AWS_ENDPOINT_URL_S3');
    expect(localStackEnv('http://localhost:4566', { AWS_ENDPOINT_URL_S3: 'http://s3.example:4566' }).AWS_ENDPOINT_URL_S3).toBe('http://s3.example:4566');
  });
});
