/**
 * Preloaded into `npm start`'s processes by the isolation benchmark when BENCH_ACCESS_LOG=1
 * (`node --import <this> --import tsx bin/local.ts`; node:cluster passes the flag on to the workers):
 * - every line a process writes to stderr (the platform's JSON log, at LOG_LEVEL=info its access
 *   lines with each request's duration) is also appended to BENCH_SERVER_LOG;
 * - each second, a `bench-loop` line there: the process's role, its event loop's worst delay in that
 *   second and the CPU it used. A second with a long delay and little CPU is a process that waited to
 *   be scheduled; one with a long delay and a full second of CPU is a process busy with something.
 * Plain JavaScript, so it loads before tsx.
 */
import { appendFileSync } from 'node:fs';
import cluster from 'node:cluster';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.BENCH_SERVER_LOG;
if (file) {
  const append = (text) => {
    try {
      appendFileSync(file, text);
    } catch {
      // the bench removed the file: keep serving
    }
  };
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => {
    append(typeof chunk === 'string' ? chunk : Buffer.from(chunk));
    return write(chunk, ...rest);
  };

  const role = cluster.isPrimary ? 'primary' : process.argv.includes('--platform-background') ? 'background' : 'serving';
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let cpu = process.cpuUsage();
  const timer = setInterval(() => {
    const used = process.cpuUsage(cpu);
    cpu = process.cpuUsage();
    append(
      JSON.stringify({
        message: 'bench-loop',
        time: new Date().toISOString(),
        pid: process.pid,
        role,
        delay_max_ms: Math.round(delay.max / 1e5) / 10,
        delay_p99_ms: Math.round(delay.percentile(99) / 1e5) / 10,
        cpu_ms: Math.round((used.user + used.system) / 1000),
      }) + '\n',
    );
    delay.reset();
  }, 1000);
  timer.unref();
}
