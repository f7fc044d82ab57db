import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Suites start real servers (local platform, dynalite, s3rver); two cores, so keep forks few.
    pool: 'forks',
    maxWorkers: 2,
  },
});
