/**
 * Preloaded into `npm start`'s processes by the isolation benchmark when BENCH_ACCESS_LOG=1
 * (`node --import <this> --import tsx bin/local.ts`; node:cluster passes the flag on to the workers):
 * every line a process writes to stderr (the platform's JSON log, at LOG_LEVEL=info its access lines
 * with each request's duration) is also appended to BENCH_SERVER_LOG. Plain JavaScript, so it loads
 * before tsx.
 */
import { appendFileSync } from 'node:fs';

const file = process.env.BENCH_SERVER_LOG;
if (file) {
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => {
    try {
      appendFileSync(file, typeof chunk === 'string' ? chunk : Buffer.from(chunk));
    } catch {
      // the bench removed the file: keep serving
    }
    return write(chunk, ...rest);
  };
}
