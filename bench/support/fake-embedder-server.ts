/**
 * The tests' fake embedder (test/helpers/fake-embedder.ts) as a process of its own, for benchmarks
 * that run the platform in their process: hashing every word of every text is the upstream's work, so
 * it runs apart, as a remote model would, and only its answers' latency reaches the platform.
 * Prints `fake embedder at <base URL>` once listening; runs until signalled.
 */
import { startFakeEmbedder } from '../../test/helpers/fake-embedder.js';

const embedder = await startFakeEmbedder();
process.stdout.write(`fake embedder at ${embedder.baseUrl}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void embedder.close().then(() => process.exit(0)));
