/**
 * One route table: every handler module under lambdas/http/handlers is named by an entry of
 * lambdas/http/routes.ts (ROUTES or SOCKET_ROUTES, a streamed handler included), every entry names a
 * module that exports `handler`, and every function the stack builds is a route's or a consumer's.
 * The checks are tested on made-up tables and sources, so a route outside the table cannot pass.
 */
import { join, relative, sep } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { ROUTES, SOCKET_ROUTES } from '../../lambdas/http/routes.js';
import { functionsOutsideTable, handlersOutsideTable, HANDLERS_DIR, readModules, tableEntriesWithoutHandler } from '../helpers/route-table.js';

const ROOT = join(import.meta.dirname, '..', '..');
const TABLE = [...ROUTES, ...SOCKET_ROUTES];

// The entry module (under lambdas/, no extension) of every Node.js function the stack builds, recorded as it synthesizes.
const entries = vi.hoisted(() => [] as string[]);
vi.mock('aws-cdk-lib/aws-lambda-nodejs', async (importOriginal) => {
  const real = await importOriginal<typeof import('aws-cdk-lib/aws-lambda-nodejs')>();
  class NodejsFunction extends real.NodejsFunction {
    constructor(...args: ConstructorParameters<typeof real.NodejsFunction>) {
      super(...args);
      entries.push(relative(join(ROOT, 'lambdas'), args[2]!.entry!).replace(/\.ts$/, '').split(sep).join('/'));
    }
  }
  return { ...real, NodejsFunction };
});

describe('the route table', () => {
  it('names every handler module, and each of its modules exports a handler', () => {
    const sources = readModules(ROOT, HANDLERS_DIR);
    expect(Object.keys(sources).length).toBeGreaterThan(40);
    expect(handlersOutsideTable(sources, TABLE)).toEqual([]);
    expect(tableEntriesWithoutHandler(sources, TABLE)).toEqual([]);
  });

  it('names the module of every function the stack builds, but the consumers', async () => {
    const { synthStack } = await import('../infra/helpers.js');
    synthStack();
    // One function per route, the streamed chat function, and the queue and schedule consumers.
    expect(entries.length).toBeGreaterThan(TABLE.length);
    expect(entries.some((m) => m.startsWith('consumers/'))).toBe(true);
    expect(functionsOutsideTable(entries, TABLE)).toEqual([]);
    // The streamed chat function is built from the table's streamedHandler.
    expect(entries).toContain(ROUTES.find((r) => r.streamedHandler)!.streamedHandler);
  }, 60_000);

  describe('the checks', () => {
    const table = [
      { id: 'ai.chat', handler: 'http/handlers/ai/chat', streamedHandler: 'http/handlers/ai/chat-streamed' },
      { id: 'data.list', handler: 'http/handlers/data/list' },
    ];
    const handler = 'export const handler = httpHandler("x", async () => ({ status: 200 }));';

    it('refuse a handler module no entry names, and leave helpers of handlers alone', () => {
      const sources = {
        'http/handlers/ai/chat': handler,
        'http/handlers/ai/chat-streamed': 'export async function handler(event, context) {}',
        'http/handlers/data/list': handler,
        'http/handlers/data/versions': 'export function ifMatchVersion() {}',
        'http/handlers/data/export': handler,
        'http/handlers/events/socket': 'const run = () => {};\nexport { run as handler };',
      };
      expect(handlersOutsideTable(sources, table)).toEqual(['http/handlers/data/export', 'http/handlers/events/socket']);
      expect(tableEntriesWithoutHandler(sources, table)).toEqual([]);
    });

    it('refuse an entry whose module is missing or exports no handler', () => {
      expect(tableEntriesWithoutHandler({ 'http/handlers/ai/chat': handler, 'http/handlers/data/list': 'export const list = 1;' }, table)).toEqual([
        'http/handlers/ai/chat-streamed',
        'http/handlers/data/list',
      ]);
    });

    it('refuse a function the stack builds from a module outside the table, and let consumers be', () => {
      expect(functionsOutsideTable(['http/handlers/ai/chat', 'http/handlers/ai/chat-streamed', 'consumers/webhooks'], table)).toEqual([]);
      expect(functionsOutsideTable(['http/handlers/ai/chat', 'http/handlers/ai/chat-stream', 'local/server'], table)).toEqual([
        'http/handlers/ai/chat-stream',
        'local/server',
      ]);
    });
  });
});
