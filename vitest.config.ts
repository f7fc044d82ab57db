import { defineConfig } from 'vitest/config';
import { SlowFirst } from './test/setup/slow-first.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The admin CLI bundled once for the run (test/helpers/cli.ts runs it as a child process).
    globalSetup: ['test/setup/admin-cli.ts'],
    // Every fetch to a platform API port is checked against its OpenAPI document (docs/openapi.md).
    setupFiles: ['test/setup/openapi-answers.ts'],
    sequence: { sequencer: SlowFirst },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Suites start real servers (local platform, dynalite, s3rver); two cores, so keep forks few.
    pool: 'forks',
    maxWorkers: 2,
    // Node 20 runs here (Lambda runs 22); the SDK is pinned in the lock file, so its notice is noise.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', LOG_LEVEL: 'silent' },
  },
});
