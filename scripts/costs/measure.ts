/**
 * Runs each scenario on a warm platform, as a warm Lambda instance serves it: first uncounted calls
 * (caches filled, code optimized), then counted calls (what AWS would bill, averaged), then timed calls
 * with the meter off (its own reads would otherwise be timed): the median is the duration estimate.
 */
import { performance } from 'node:perf_hooks';
import { median } from '../../bench/support/load.js';
import { addUsage, noUsage, type MeteredRequest, type Usage } from './meter.js';
import type { CostPlatform } from './platform.js';
import type { Scenario } from './scenarios.js';

export interface Measured {
  scenario: Scenario;
  /** What one call made AWS bill, on average over the counted calls. */
  usage: Usage;
  /** Median handler duration, ms. */
  durationMs: number;
  /** The requests the last counted call made, in order. */
  requests: MeteredRequest[];
}

export interface MeasureOptions {
  warmup: number;
  counted: number;
  timed: number;
}

export async function measure(p: CostPlatform, scenario: Scenario, o: MeasureOptions): Promise<Measured> {
  const prepared = async () => {
    p.meter.on = false;
    await scenario.prepare?.();
  };
  for (let i = 0; i < o.warmup; i++) {
    await prepared();
    await scenario.call();
  }

  let total = noUsage();
  let requests: MeteredRequest[] = [];
  for (let i = 0; i < o.counted; i++) {
    await prepared();
    p.meter.take();
    p.meter.log = requests = [];
    p.meter.on = true;
    try {
      await scenario.call();
    } finally {
      p.meter.log = undefined;
    }
    total = addUsage(total, p.meter.take());
  }
  const usage = noUsage();
  for (const k of Object.keys(usage) as (keyof Usage)[]) usage[k] = total[k] / o.counted;
  usage.sqsRequests += scenario.sqsOutside ?? 0;

  const durations: number[] = [];
  for (let i = 0; i < o.timed; i++) {
    await prepared();
    const started = performance.now();
    await scenario.call();
    durations.push(performance.now() - started);
  }
  p.meter.on = true;
  return { scenario, usage, durationMs: median(durations), requests };
}
