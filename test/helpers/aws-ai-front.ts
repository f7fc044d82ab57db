/**
 * The AI API's routes as Lambda behind API Gateway (test/helpers/lambda-front.ts) over dynalite and
 * s3rver, with one organization, its workspace and a secret key: the setup the AWS upload tests share.
 * Registers its own beforeAll/afterAll; read the fields inside tests.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { startAwsDataEngine } from './aws-data-engine.js';
import { startLambdaFront, type LambdaFront } from './lambda-front.js';
import { standInListParts, type PresignedParts } from './presigned-parts.js';
import type { S3rverBucket } from './s3rver.js';

export interface AwsAiFront {
  engine: Engine;
  s3: S3rverBucket;
  gateway: LambdaFront;
  org: string;
  /** The organization's workspace (`main`). */
  workspace: string;
  key: string;
  /** The store's listParts answered from what S3 answered each part PUT (s3rver has no ListParts). */
  parts: PresignedParts;
  /** A call with the key and a fresh X-Operation-Id; the answer's JSON. */
  call(method: string, path: string, body?: object): Promise<{ status: number; body: any }>;
}

export function useAwsAiFront(name: string): AwsAiFront {
  const front = {} as AwsAiFront;
  beforeAll(async () => {
    process.env.LOG_LEVEL = 'silent';
    const started = await startAwsDataEngine(name);
    front.engine = started.engine;
    front.s3 = started.s3;
    front.parts = standInListParts(started.engine);
    useEngine(started.engine);
    const tenants = new Tenants(started.engine.kv, () => Date.now());
    front.org = (await tenants.createOrganization(name)).id;
    front.workspace = (await tenants.createWorkspace(front.org, 'main')).id;
    front.key = (await tenants.createSecretKey(front.org)).key;
    front.gateway = await startLambdaFront('ai');
  }, 60_000);
  afterAll(async () => {
    await front.gateway?.close();
    await front.engine?.close();
  });
  front.call = async (method, path, body) => {
    const res = await fetch(front.gateway.url + path, {
      method,
      body: body && JSON.stringify(body),
      headers: { authorization: `Bearer ${front.key}`, 'x-operation-id': `op-${randomUUID()}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  return front;
}
