/**
 * The layer rules of docs/architecture.md, checked on every import of lambdas/, lib/ and bin/: domain
 * modules never import http, see only the engine's ports (never an adapter or the adapters' kit),
 * adapters never import each other, settings are a leaf every layer reads, nothing but the engine's
 * adapters imports an AWS SDK, and no project files import each other in a cycle. The checkers
 * themselves are tested on made-up sources, so a violation cannot pass.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { cycles, importsOf, layerOf, readImports, violations } from '../helpers/import-graph.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('layers', () => {
  it('hold for every import of the project', () => {
    const imports = readImports(ROOT, ['lambdas', 'lib', 'bin']);
    expect(imports.length).toBeGreaterThan(300);
    expect(violations(imports)).toEqual([]);
  });

  it('have no file-level import cycle', () => {
    expect(cycles(readImports(ROOT, ['lambdas', 'lib', 'bin']))).toEqual([]);
  });

  it('give every source folder a layer with a rule', () => {
    const layers = new Set(readImports(ROOT, ['lambdas', 'lib', 'bin']).map((i) => layerOf(i.from)));
    expect([...layers].sort()).toEqual(
      ['activity', 'admin', 'ai', 'ai/openai-compat', 'ai/providers/bedrock', 'auth', 'bin', 'console', 'consumers', 'data', 'edge', 'engine', 'engine/adapter-kit', 'engine/aws', 'engine/embedded', 'engine/index', 'events', 'http', 'knowledge', 'lib', 'local', 'openapi', 'settings', 'shared', 'vector'].sort(),
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

    it('lets only knowledge import the document parsers and the tokenizer', () => {
      expect(check('lambdas/knowledge/extract/pdf.ts', "import { extractText } from 'unpdf';")).toEqual([]);
      expect(check('lambdas/knowledge/chunks.ts', "import { Tiktoken } from 'js-tiktoken/lite';")).toEqual([]);
      expect(check('lambdas/vector/x.ts', "import { Lexer } from 'marked';")).toEqual(['lambdas/vector/x.ts:1 (vector) imports the package marked']);
      expect(check('lambdas/http/x.ts', "import mammoth from 'mammoth';")).toHaveLength(1);
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
    it('finds a file-level import cycle, type-only imports included, and leaves a chain alone', () => {
      const graph = (files: Record<string, string>) => cycles(importsOf(files));
      expect(
        graph({
          'lib/a.ts': "import { b } from './b.js';",
          'lib/b.ts': "import type { C } from './c.js';",
          'lib/c.ts': "import { a } from './a.js';\nimport { d } from './d.js';",
          'lib/d.ts': "import { Stack } from 'aws-cdk-lib';",
        }),
      ).toEqual([['lib/a.ts', 'lib/b.ts', 'lib/c.ts']]);
      expect(
        graph({
          'lambdas/data/x.ts': "import { y } from './y.js';",
          'lambdas/data/y.ts': "export { x } from './x.js';",
          'lambdas/data/z.ts': "import { y } from './y.js';",
        }),
      ).toEqual([['lambdas/data/x.ts', 'lambdas/data/y.ts']]);
      expect(graph({ 'lib/a.ts': "import { b } from './b.js';", 'lib/b.ts': "import { c } from './c.js';", 'lib/c.ts': '' })).toEqual([]);
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
    it('lets a domain module see the ports only, never the helpers the adapters share', () => {
      expect(check('lambdas/data/x.ts', "import { itemSize } from '../engine/item-size.js';\nimport type { KeyValueStore } from '../engine/ports.js';")).toEqual([]);
      expect(check('lambdas/data/x.ts', "import { applyUpdate } from '../engine/adapter-kit/kv-semantics.js';")).toEqual([
        'lambdas/data/x.ts:1 (data) imports lambdas/engine/adapter-kit/kv-semantics.ts (engine/adapter-kit)',
      ]);
      expect(check('lambdas/events/x.ts', "import { onFirstCall } from '../engine/adapter-kit/memo.js';")).toHaveLength(1);
      expect(check('lambdas/http/x.ts', "import { assertQueueSend } from '../engine/adapter-kit/queue-checks.js';")).toHaveLength(1);
      expect(check('lambdas/shared/x.ts', "import { checkPartList } from '../engine/adapter-kit/blob-checks.js';")).toHaveLength(1);
      expect(check('lambdas/engine/aws/x.ts', "import { applyUpdate } from '../adapter-kit/kv-semantics.js';")).toEqual([]);
      expect(check('lambdas/engine/index.ts', "import { onFirstCall } from './adapter-kit/memo.js';")).toEqual([]);
    });
    it('keeps the ports the floor: they import nothing of the project but each other and the settings', () => {
      expect(check('lambdas/engine/x.ts', "import { PlatformError } from '../shared/errors.js';")).toEqual(['lambdas/engine/x.ts:1 (engine) imports lambdas/shared/errors.ts (shared)']);
      expect(check('lambdas/engine/x.ts', "import { memoUntilFailure } from './adapter-kit/memo.js';")).toHaveLength(1);
      expect(check('lambdas/engine/x.ts', "import { settings } from '../shared/settings.js';")).toEqual([]);
    });
    it('lets every layer read the settings, and the settings read no project file', () => {
      const readers = {
        'lambdas/engine/aws/x.ts': '../../shared/settings.js',
        'lambdas/engine/embedded/x.ts': '../../shared/settings.js',
        'lambdas/engine/index.ts': '../shared/settings.js',
        'lambdas/data/x.ts': '../shared/settings.js',
        'lambdas/http/x.ts': '../shared/settings.js',
        'lib/x.ts': '../lambdas/shared/settings.js',
      };
      for (const [file, settings] of Object.entries(readers)) expect(check(file, `import { settings } from '${settings}';`), file).toEqual([]);
      expect(check('lambdas/shared/settings.ts', "import { PlatformError } from './errors.js';")).toEqual([
        'lambdas/shared/settings.ts:1 (settings) imports lambdas/shared/errors.ts (shared)',
      ]);
      expect(check('lambdas/shared/settings.ts', "import type { QueueName } from '../engine/queues.js';")).toHaveLength(1);
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
