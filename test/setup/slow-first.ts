/**
 * Test file order: the slowest files first. Vitest orders by the durations it cached from earlier
 * runs, but CI runs a clean clone with no cache, where it orders by file size, and a slow small file
 * (the synth check, the model tests) then starts last and runs alone while the other worker idles.
 * The files named here (the slowest of a full run) go first, in this order; the rest as Vitest orders.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const SLOW_FIRST = [
  'test/api/vector-crash.test.ts',
  // Knowledge jobs: a crash and restart of npm start, and jobs over real recordings (issue 36).
  'test/api/knowledge-jobs-crash.test.ts',
  'test/api/knowledge-jobs-pipeline.test.ts',
  'test/api/events-crash.test.ts',
  'test/api/ai-hostile-upstreams-budget-and-ids.test.ts',
  'test/infra/lambda-bundles.test.ts',
  'test/api/knowledge-isolation.test.ts',
  'test/infra/synth.test.ts',
  'test/api/events-dead-replay.test.ts',
  'test/api/events-hostile-input-and-revocation.test.ts',
  'test/model/records.model.aws.test.ts',
  'test/api/events-inbox-stats.test.ts',
  'test/model/events-stats.model.test.ts',
  'test/api/events-stream-revocation.test.ts',
  'test/api/crash.test.ts',
  'test/api/write-concurrency.test.ts',
  'test/cli/vector-admin.test.ts',
  'test/model/vector.model.aws.test.ts',
  'test/model/vector.model.test.ts',
  // Issue 35: the document-driven fuzzer (59 operations) and the reference page in Chromium.
  'test/fuzz/openapi-fuzz.test.ts',
  'test/browser/api-docs.test.ts',
];

export class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = SLOW_FIRST.findIndex((path) => f.moduleId.endsWith(path));
      return i === -1 ? SLOW_FIRST.length : i;
    };
    // Array.prototype.sort is stable: the rest keep Vitest's order.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}
