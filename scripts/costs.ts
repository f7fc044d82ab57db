/**
 * `npm run costs`: the cost model. Runs the main routes of each API through their real handlers over
 * the embedded engine, counting what AWS would bill per call (scripts/costs/meter.ts) and timing each
 * handler, prices a million calls of each, the idle stack and the hosted peers, and prints the tables.
 * `--write` also puts them into docs/costs.md; `--runs N` sets the timed calls per route (default 50).
 * How and what it counts, and what it leaves out: docs/costs.md.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { arch, availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { median } from '../bench/support/load.js';
import { useSettings } from '../lambdas/shared/settings.js';
import { idleCosts, type IdleRun } from './costs/idle.js';
import { measure, type Measured } from './costs/measure.js';
import { peerRows } from './costs/peers.js';
import { startCostPlatform, type CostPlatform } from './costs/platform.js';
import { replaceGenerated, report, routeCosts } from './costs/report.js';
import { scenarios } from './costs/scenarios.js';
import { synthesizedCensus, type StackCensus } from './costs/template.js';

const DOC = join(import.meta.dirname, '..', 'docs', 'costs.md');
/** The scheduled functions of the stack (lambdas/consumers/), each run idle to price a schedule. */
const SWEEPS = ['outbox-sweep', 'platform-events-sweep'];

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
}

/** One run of each scheduled sweep with nothing to sweep: their mean use and median duration. */
async function idleSweep(p: CostPlatform, timed: number): Promise<IdleRun> {
  const durations: number[] = [];
  p.meter.on = false;
  for (const sweep of SWEEPS) await p.runScheduled(sweep);
  p.meter.take();
  p.meter.on = true;
  for (const sweep of SWEEPS) await p.runScheduled(sweep);
  const usage = p.meter.take();
  for (const k of Object.keys(usage) as (keyof typeof usage)[]) usage[k] /= SWEEPS.length;
  p.meter.on = false;
  for (let i = 0; i < timed; i++) {
    for (const sweep of SWEEPS) {
      const started = performance.now();
      await p.runScheduled(sweep);
      durations.push(performance.now() - started);
    }
  }
  p.meter.on = true;
  return { usage, durationMs: median(durations) };
}

async function main(): Promise<void> {
  process.env.LOG_LEVEL ??= 'silent';
  // The webhook receiver of the delivery scenario is on loopback.
  useSettings({ eventsAllowLoopbackWebhooks: true });
  const runs = Number(option('--runs') ?? 50);
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs takes a positive whole number');
  const plan = { warmup: 20, counted: 5, timed: runs };

  const started = Date.now();
  const p = await startCostPlatform();
  const measured: Measured[] = [];
  /** Routes whose call failed: the others are still priced, but nothing is written. */
  const failed: string[] = [];
  let sweep: IdleRun;
  try {
    const s = await scenarios(p);
    try {
      for (const scenario of s.list) {
        try {
          measured.push(await measure(p, scenario, plan));
        } catch (error) {
          failed.push(`${scenario.api}: ${scenario.name}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    } finally {
      await s.close();
    }
    sweep = await idleSweep(p, runs);
  } finally {
    await p.close();
  }

  let census: StackCensus;
  let idleNote: string;
  try {
    census = synthesizedCensus();
    idleNote = 'Counted in the synthesized templates (nested stacks included) when this was generated.';
  } catch (error) {
    census = { byType: {}, schedules: [], pitrTables: 0, alarmMetrics: 0 };
    idleNote = `The stack did not synthesize (${String(error).split('\n')[0]}): nothing counted.`;
  }
  const idle = idleCosts(census, sweep);

  const routes = routeCosts(measured);
  const total = (name: string) => routes.find((r) => r.measured.scenario.name.startsWith(name))?.cost.total ?? NaN;
  const peers = peerRows({ webhookEvent: total('publish') + total('webhook delivery'), chatCall: total('chat completion'), simpleRoute: total('record get') });

  const cpu = cpus()[0]?.model.trim() ?? 'an unknown CPU';
  const text = report({
    routes,
    idle,
    idleNote,
    peers,
    machine: `${new Date().toISOString().slice(0, 10)}, ${cpu} (${availableParallelism()} cores, ${arch()}), Node.js ${process.version}, the embedded engine`,
    runs: `each route warmed with ${plan.warmup} calls, counted over ${plan.counted}, timed over ${plan.timed}`,
  });
  process.stdout.write(`${text}\n\n(${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  if (failed.length) {
    process.stderr.write(`costs: ${failed.length} route(s) failed, left out above and nothing written:\n${failed.map((f) => `  ${f}`).join('\n')}\n`);
    process.exitCode = 1;
    return;
  }
  if (process.argv.includes('--write')) {
    writeFileSync(DOC, replaceGenerated(readFileSync(DOC, 'utf8'), text));
    process.stdout.write(`wrote ${DOC}\n`);
  }
}

main().catch((error) => {
  process.stderr.write(`costs: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
