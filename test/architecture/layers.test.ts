/**
 * The layer rules of docs/architecture.md, checked on every import of lambdas/, lib/ and bin/: domain
 * modules never import http, adapters never import each other, nothing but the engine's adapters
 * imports an AWS SDK. The checker itself is tested on made-up sources, so a violation cannot pass.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { importsOf, layerOf, readImports, violations } from '../helpers/import-graph.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('layers', () => {
  it('hold for every import of the project', () => {
    const imports = readImports(ROOT, ['lambdas', 'lib', 'bin']);
    expect(imports.length).toBeGreaterThan(300);
    expect(violations(imports)).toEqual([]);
  });

  it('give every source folder a layer with a rule', () => {
    const layers = new Set(readImports(ROOT, ['lambdas', 'lib', 'bin']).map((i) => layerOf(i.from)));
    expect([...layers].sort()).toEqual(
      ['activity', 'admin', 'ai', 'ai/providers/bedrock', 'auth', 'bin', 'consumers', 'data', 'engine', 'engine/aws', 'engine/embedded', 'engine/index', 'events', 'http', 'lib', 'local', 'shared'].sort(),
    );
  });

  describe('the checker', () => {
    const check = (file: string, text: string) => violations(importsOf({ [file]: text }));

    it('lets only the Bedrock provider import the Bedrock SDK, and that provider no other AWS SDK', () => {
      expect(check('lambdas/ai/gateway.ts', "import { ConverseCommand } from '@aws-sdk/client-bedrock-runtime';")).toHaveLength(1);
      expect(check('lambdas/ai/providers/openai-compatible/index.ts', "import { ConverseCommand } from '@aws-sdk/client-bedrock-runtime';")).toHaveLength(1);
      expect(check('lambdas/ai/providers/bedrock/index.ts', "import { ConverseCommand } from '@aws-sdk/client-bedrock-runtime';")).toEqual([]);
      expect(check('lambdas/ai/providers/bedrock/index.ts', "import { S3Client } from '@aws-sdk/client-s3';")).toHaveLength(1);
    });

    it('catches a domain module importing the HTTP layer', () => {
      expect(check('lambdas/data/records.ts', "import type { HttpRequest } from '../http/types.js';")).toEqual([
        'lambdas/data/records.ts:1 (data) imports lambdas/http/types.ts (http)',
      ]);
      expect(check('lambdas/auth/x.ts', "import { httpHandler } from '../http/handler.js';")).toHaveLength(1);
    });
    it('catches an adapter importing another adapter, and a domain module importing an adapter', () => {
      expect(check('lambdas/engine/aws/queue.ts', "import { assertQueueSend } from '../embedded/queue.js';")).toHaveLength(1);
      expect(check('lambdas/data/blobs.ts', "import { S3BlobStore } from '../engine/aws/blobs.js';")).toHaveLength(1);
    });
    it('catches an AWS SDK outside the AWS adapters, and activity importing data', () => {
      expect(check('lambdas/data/x.ts', "import { S3Client } from '@aws-sdk/client-s3';")).toEqual(['lambdas/data/x.ts:1 (data) imports the package @aws-sdk/client-s3']);
      expect(check('lambdas/engine/aws/x.ts', "import { S3Client } from '@aws-sdk/client-s3';")).toEqual([]);
      expect(check('lambdas/activity/x.ts', "import { dataHooks } from '../data/hooks.js';")).toHaveLength(1);
    });
    it('reads multi-line, type-only, re-export and dynamic imports', () => {
      const text = [
        "import {",
        "  a,",
        "  b,",
        "} from '../http/chain.js';",
        "export { c } from '../local/platform.js';",
        "const m = await import('../engine/embedded/index.js');",
      ].join('\n');
      expect(check('lambdas/data/y.ts', text)).toEqual([
        'lambdas/data/y.ts:4 (data) imports lambdas/http/chain.ts (http)',
        'lambdas/data/y.ts:5 (data) imports lambdas/local/platform.ts (local)',
        'lambdas/data/y.ts:6 (data) imports lambdas/engine/embedded/index.ts (engine/embedded)',
      ]);
    });
    it('lets the HTTP layer import domain modules, and shared only the ports', () => {
      expect(check('lambdas/http/handlers/data/x.ts', "import { openDatabase } from '../../../data/records.js';")).toEqual([]);
      expect(check('lambdas/shared/x.ts', "import type { KeyValueStore } from '../engine/ports.js';")).toEqual([]);
      expect(check('lambdas/shared/x.ts', "import { SqliteKeyValueStore } from '../engine/embedded/kv.js';")).toHaveLength(1);
    });
    it('lets queue consumers wire the engine, the SQS handler shape and a domain consumer, and nothing of http or the embedded engine', () => {
      expect(check('lambdas/consumers/x.ts', "import { sqsConsumerHandler } from '../engine/aws/queue.js';\nimport { webhookConsumer } from '../events/delivery.js';\nimport type { SQSEvent } from 'aws-lambda';")).toEqual([]);
      expect(check('lambdas/consumers/x.ts', "import { httpHandler } from '../http/handler.js';")).toHaveLength(1);
      expect(check('lambdas/consumers/x.ts', "import { runConsumer } from '../engine/embedded/queue.js';")).toHaveLength(1);
      expect(check('lambdas/consumers/x.ts', "import { SQSClient } from '@aws-sdk/client-sqs';")).toHaveLength(1);
    });
  });
});
