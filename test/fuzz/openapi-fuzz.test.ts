/**
 * The OpenAPI documents drive a fuzzer (Schemathesis' idea, in Node; docs/decisions/openapi-fuzzer.md):
 * for every operation of docs/openapi/{ai,data,events}.json, fast-check draws requests from the
 * document's schemas (valid ones, and ones broken in one place) and sends them to a real local
 * platform with real credentials and resources. Every answer must be below 500, described by the
 * document, and a broken request must get a 4xx whose `error.param` names the broken place.
 *
 * Replay a finding: OPENAPI_FUZZ_OP=<operationId> OPENAPI_FUZZ_SEED=<seed> OPENAPI_FUZZ_RUN=<run> npx vitest run test/fuzz/openapi-fuzz.test.ts
 * More runs: OPENAPI_FUZZ_RUNS=<n> (default below); a summary of the answers: OPENAPI_FUZZ_REPORT=1 (every exchange: =all).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { APIS } from '../../lambdas/shared/api.js';
import { settings, useSettings } from '../../lambdas/shared/settings.js';
import { checkerFor } from '../helpers/openapi-check.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { FIXTURES, type ApiFixtures } from '../helpers/openapi-fuzz/fixtures.js';
import { describeExchange, errorOf, problemsOf, sameRefusal, send, validatesWith, verdictOf } from '../helpers/openapi-fuzz/judge.js';
import { operationsOf, requestSpace, type Operation } from '../helpers/openapi-fuzz/requests.js';

const SEED = Number(process.env.OPENAPI_FUZZ_SEED ?? 35_004);
/** Requests per operation: measured to keep the whole file under a minute on a 2-core machine (the decision's numbers). */
const RUNS = Number(process.env.OPENAPI_FUZZ_RUNS ?? 50);
/** The most one operation may take, whatever the machine's load: past it its runs stop (not a failure). */
const OPERATION_BUDGET_MS = Number(process.env.OPENAPI_FUZZ_OPERATION_MS ?? 4_000);
const ONLY = process.env.OPENAPI_FUZZ_OP;
const RUN = process.env.OPENAPI_FUZZ_RUN;
const REPORT = process.env.OPENAPI_FUZZ_REPORT === '1' || process.env.OPENAPI_FUZZ_REPORT === 'all';
const REPORT_ALL = process.env.OPENAPI_FUZZ_REPORT === 'all';

/**
 * Operations not fuzzed, and why: the WebSocket stream answers only an upgrade handshake (its frames
 * are not HTTP requests a document describes; test/api/events-stream.test.ts tries its input).
 */
const skipped = (o: Operation) => o.op.responses?.['101'] !== undefined;

/** Deletes last, the deepest first (an item before its collection): until then the real ids they remove serve every other operation. */
const ordered = (ops: Operation[]) => [
  ...ops.filter((o) => o.method !== 'DELETE'),
  ...ops.filter((o) => o.method === 'DELETE').sort((a, b) => b.template.split('/').length - a.template.split('/').length),
];

const apis = APIS.filter((api) => checkerFor(api) !== null && FIXTURES[api] !== undefined);
// Until `npm run openapi` has written a document there is nothing to fuzz (a file with no test fails).
it.skipIf(apis.length > 0)('fuzzes nothing: no document in docs/openapi/ yet', () => undefined);

let p: TestPlatform;
const cpuAtStart = process.cpuUsage();
beforeAll(async () => {
  if (apis.length === 0) return;
  // Thousands of calls a minute on one key, and webhooks to a receiver on loopback.
  useSettings({ ...settings(), eventsRateLimitPerMinute: 0, eventsAllowLoopbackWebhooks: true });
  p = await startTestPlatform();
});
afterAll(async () => {
  if (REPORT) {
    const used = process.cpuUsage(cpuAtStart);
    console.log(`fuzzing CPU (test and platform, one process): ${Math.round((used.user + used.system) / 1000)} ms`);
  }
  await p?.close();
  useSettings();
  // The platform ran in this process: no input may have reached Object.prototype.
  expect(Object.getOwnPropertyNames(Object.prototype).filter((k) => !BUILTIN_PROTOTYPE_KEYS.has(k))).toEqual([]);
});
const BUILTIN_PROTOTYPE_KEYS = new Set(Object.getOwnPropertyNames(Object.prototype));

for (const api of apis) {
  describe(`fuzzing the ${api} API from docs/openapi/${api}.json`, () => {
    const checker = checkerFor(api)!;
    const validates = validatesWith(checker);
    const operations = ordered(operationsOf(checker.document)).filter((o) => !skipped(o) && (!ONLY || o.op.operationId === ONLY));
    let fixtures: ApiFixtures;
    beforeAll(async () => {
      fixtures = await FIXTURES[api]!(p);
    });
    afterAll(async () => fixtures?.close?.());

    for (const operation of operations) {
      const id = String(operation.op.operationId);
      it(`${operation.method} ${operation.template} (${id})`, async () => {
        await fixtures.refresh();
        const space = requestSpace({ document: checker.document, validates }, operation, fixtures.forOperation(operation));
        const findings: string[] = [];
        const statuses = new Map<string, number>();
        const samples = new Map<string, string>();
        let run = RUN === undefined ? 0 : Number(RUN);
        const notes: string[] = [];
        let sendMs = 0;
        const cpu = process.cpuUsage();
        const property = fc.asyncProperty(space.arbitrary, async (req) => {
          const index = run++;
          const replay = `replay: OPENAPI_FUZZ_OP=${id} OPENAPI_FUZZ_SEED=${SEED} OPENAPI_FUZZ_RUN=${index}`;
          const started = performance.now();
          const answer = await send(fixtures.baseUrl, req);
          sendMs += performance.now() - started;
          const tag = `${req.broken ? `broken ${req.broken.where}` : 'valid'} ${answer.status}`;
          statuses.set(tag, (statuses.get(tag) ?? 0) + 1);
          if (REPORT && !samples.has(tag)) samples.set(tag, describeExchange(req, answer));
          if (REPORT_ALL) console.log(`  ${index} ${tag}: ${describeExchange(req, answer).slice(0, 600)}`);
          const problems = problemsOf(api, checker, req, answer);
          if (req.broken) {
            const verdict = verdictOf(req, answer, space.namesParams);
            if (!verdict.ok && verdict.refused && req.base) {
              // Refused without naming the broken place: a misnaming, unless the request unbroken is
              // refused the same way (the route stopped at another place, or at the resource's state, first).
              const base = await send(fixtures.baseUrl, req.base);
              problems.push(...problemsOf(api, checker, req.base, base));
              if (sameRefusal(answer, base)) notes.push(`${answer.status} ${JSON.stringify(errorOf(base))}: ${describeExchange(req.base, base)}`);
              else problems.push(`${verdict.problem} (unbroken: ${base.status} ${JSON.stringify(errorOf(base))})`);
            } else if (!verdict.ok) problems.push(verdict.problem);
          }
          for (const problem of problems) findings.push(`${problem}\n      ${describeExchange(req, answer)}\n      ${replay}`);
        });
        // Findings are gathered, not thrown: one run lists every defect of the operation with its replay.
        await fc.assert(property, {
          seed: SEED,
          numRuns: RUN === undefined ? RUNS : 1,
          ...(RUN === undefined ? {} : { path: RUN }),
          endOnFailure: true,
          plugins: [fc.interruptAfterTimeLimit(OPERATION_BUDGET_MS)],
        });
        if (REPORT) {
          const used = process.cpuUsage(cpu);
          console.log(`${api} ${id}: ${run} runs, ${[...statuses].sort().map(([k, n]) => `${k}×${n}`).join(', ')}; sending ${Math.round(sendMs)} ms, CPU ${Math.round((used.user + used.system) / 1000)} ms`);
          for (const [tag, sample] of samples) console.log(`  ${tag}: ${sample.slice(0, 600)}`);
          for (const note of notes) console.log(`  refused unbroken too (the document takes what the route refuses, or the resource's state): ${note.slice(0, 400)}`);
        }
        expect(findings, `${findings.length} findings (seed ${SEED})`).toEqual([]);
      });
    }
  });
}
