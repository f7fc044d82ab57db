/**
 * Issue 34, Deliver 2: nothing an answered AI call promised is lost to a crash. `npm start` (real child
 * process, DATA_DIR on disk) is sent many concurrent chat calls, each with its own X-Operation-Id, and
 * SIGKILLed (every process of its group) while calls are in flight. Started again over the same data:
 * - every call answered 200 replays its answer (`x-idempotent-replay: true`, same body, the upstream
 *   not asked again: spec 3, 4.1);
 * - every call answered 200, and a stream read to its `data: [DONE]`, has exactly one `ai.usage` event
 *   with its operation id and the usage the upstream reported (docs/decisions/ai-usage.md). Activity
 *   events were buffered 100 ms in memory, so the last answers' usage died with the process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { crashLocalProcess, startLocalProcess, useLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';
import { postWithOperation as post, type Answer } from '../helpers/ai-calls.js';

/** A bound only: the calls go on until the crash (about 160 are sent). */
const MAX_CALLS = 1000;
const IN_FLIGHT = 50;
/** Answers before the stream, then the crash. */
const CRASH_AFTER = 60;

const used = useLocalProcess('ai-crash-');
let fake: FakeOpenAi;
let restarted: LocalProcess | undefined;

beforeAll(async () => {
  fake = await startFakeOpenAi();
  adminOk(used.dataDir, 'route', 'set', '--org', used.org, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
}, 30_000);

afterAll(async () => {
  if (restarted) await crashLocalProcess(restarted);
  await fake?.close();
});

const chatBody = (id: string, extra: object = {}) => ({ messages: [{ role: 'user', content: id }], ...extra });
const upstreamCallsFor = (id: string) => fake.requests.filter((r) => r.body?.messages?.[0]?.content === id).length;

/** Every `ai.usage` event in the log, paged through. */
async function usageEvents(dataUrl: string, key: string): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({ kind: 'ai.usage', limit: '500', ...(cursor ? { cursor } : {}) });
    const res = await fetch(`${dataUrl}/v1/activity?${query}`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { items: any[]; next_cursor: string | null };
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

describe('npm start killed (SIGKILL) while AI calls are in flight', () => {
  it('keeps every answered call: its answer replays and its ai.usage event is there after the restart', async () => {
    // Each call waits 20 ms upstream: at the crash about IN_FLIGHT calls are still running.
    fake.behavior = { status: 200, chunks: ['Hel', 'lo', '!'], chunkDelayMs: 0, stallMs: 20 };
    const ai = used.local.urls.ai;
    const answered = new Map<string, Answer>();
    const streamId = `op-crash-stream-${Date.now()}`;
    let streamed: Answer | undefined;
    let failed = 0;
    let crash: Promise<void> | undefined;
    let killed = false;
    // A stream read to its end, then the crash at once; the other calls go on until it.
    const crashAfterStream = async () => {
      streamed = await post(ai, used.key, '/v1/chat/completions', streamId, chatBody(streamId, { stream: true }));
      killed = true;
      await crashLocalProcess(used.local);
    };
    let next = 0;
    const caller = async () => {
      while (next < MAX_CALLS && !killed) {
        const id = `op-crash-${Date.now()}-${next++}`;
        const answer = await post(ai, used.key, '/v1/chat/completions', id, chatBody(id)).catch(() => undefined);
        // A 200 that arrived whole: the server sent it, so whatever it promised is kept.
        if (answer?.status === 200 && answer.body?.object === 'chat.completion') answered.set(id, answer);
        else failed++;
        if (answered.size >= CRASH_AFTER) crash ??= crashAfterStream();
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, caller));
    await crash;
    expect(streamed?.status).toBe(200);
    expect(streamed?.text).toContain('data: [DONE]');
    // The crash came while calls were running.
    expect(failed).toBeGreaterThan(0);
    expect(answered.size).toBeGreaterThanOrEqual(CRASH_AFTER);
    restarted = await startLocalProcess({ DATA_DIR: used.dataDir, LOG_LEVEL: 'warn' });

    // Replays: the kept answer, never the upstream again.
    const ids = [...answered.keys()];
    const replayFailures: string[] = [];
    let r = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (r < ids.length) {
          const id = ids[r++];
          const replay = await post(restarted!.urls.ai, used.key, '/v1/chat/completions', id, chatBody(id));
          if (replay.status !== 200 || replay.headers['x-idempotent-replay'] !== 'true' || replay.text !== answered.get(id)!.text) {
            replayFailures.push(`${id}: ${replay.status} ${replay.headers['x-idempotent-replay']} ${replay.text.slice(0, 120)}`);
          }
          if (upstreamCallsFor(id) !== 1) replayFailures.push(`${id}: upstream asked ${upstreamCallsFor(id)} times`);
        }
      }),
    );
    expect(replayFailures).toEqual([]);

    // Usage: exactly one event per answered call, with what the upstream reported (fake-openai.ts).
    const events = await usageEvents(restarted.urls.data, used.key);
    const byOperation = new Map<string, any[]>();
    for (const e of events) byOperation.set(e.operation_id, [...(byOperation.get(e.operation_id) ?? []), e]);
    const usageFailures: string[] = [];
    for (const id of ids) {
      const found = byOperation.get(id) ?? [];
      if (found.length !== 1) usageFailures.push(`${id}: ${found.length} ai.usage events`);
      else if (found[0].status !== 200 || found[0].usage?.prompt_tokens !== 11 || found[0].usage?.completion_tokens !== 7 || found[0].usage?.total_tokens !== 18) {
        usageFailures.push(`${id}: ${JSON.stringify(found[0])}`);
      }
    }
    const stream = byOperation.get(streamId) ?? [];
    // The stream's usage chunk (asked of the upstream always): 11 in, one token per chunk.
    if (stream.length !== 1 || stream[0].status !== 200 || stream[0].usage?.prompt_tokens !== 11 || stream[0].usage?.completion_tokens !== 3) {
      usageFailures.push(`stream ${streamId}: ${JSON.stringify(stream)}`);
    }
    // A call cut short by the crash may or may not have one; never two.
    for (const [id, found] of byOperation) if (found.length > 1) usageFailures.push(`${id}: ${found.length} ai.usage events`);
    expect(usageFailures, `${usageFailures.length} of ${ids.length + 1} answered calls`).toEqual([]);
  }, 60_000);
});
