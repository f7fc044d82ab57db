/**
 * What a knowledge job may spend (docs/ai/knowledge-jobs.md, "Price"): its estimate is held against
 * the organization's and the key's budgets from the start (the budgets' counted holds, ai/limits.ts),
 * and each upstream call of the job is admitted against the job's own `max_price_usd` with its worst
 * cost, then settled with its real cost: the job's spend grows, the budgets' `spent` grows by the same
 * amount and their hold of the estimate shrinks by it (never below zero). A call whose worst cost
 * would take the job past its price is never made: the job stops `failed` with `price_limit`.
 * When the job ends (a cancel too) its spend is closed (closeJobSpend): no call is admitted after it,
 * and a call still in flight then books only its cost, the budgets' hold having been given back.
 */
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvItem, KvWrite } from '../../engine/ports.js';
import { limitsStateKey, scopesOf } from '../../ai/limits.js';
import { PlatformError } from '../../shared/errors.js';
import { addHold, bucketAttr, releaseHold, type Hold } from '../../shared/leases.js';
import { log } from '../../shared/log.js';
import { jobSpendKey } from './job-keys.js';
import type { Job } from './records.js';

/** A job may run this long; its hold of the estimate lapses after it (a job past it has failed or was lost). */
export const JOB_HOLD_MS = 48 * 3600_000;
/**
 * The start holds the estimate this long, until the transaction that writes its job moves the hold to
 * JOB_HOLD_MS (keepEstimateHolds): a start that dies between the two (a crash, a function's timeout)
 * leaves a hold no job will ever give back, which must lapse in minutes, not hold the budget 48 hours
 * (found by the attack test's SIGKILL mid-start). The start writes its job within seconds.
 */
export const START_HOLD_MS = 2 * 60_000;

const usd = (micro: number) => `$${(micro / 1e6).toFixed(6).replace(/0{1,4}$/, '')}`;
const spentOf = (item: KvItem | undefined) => (typeof item?.spent === 'number' ? item.spent : 0);

export const exceeded = (message: string) => new PlatformError('budget_exceeded', message, 'max_price_usd');

/**
 * The start's price checks and holds, before any paid work: `max_price_usd` within the organization's
 * cap, the estimate within `max_price_usd` and within what is left of each budget (all `403
 * budget_exceeded`, naming the estimate). Returns the holds taken, to be written into the job.
 */
export async function holdEstimate(engine: Engine, principal: Principal, estimateMicro: number, maxPriceMicro: number, capUsd: number | null): Promise<Job['budget_holds']> {
  if (capUsd !== null && maxPriceMicro > Math.round(capUsd * 1e6)) {
    throw exceeded(`max_price_usd ${usd(maxPriceMicro)} is over the organization's cap for a knowledge job, ${usd(Math.round(capUsd * 1e6))}.`);
  }
  if (estimateMicro > maxPriceMicro) {
    throw exceeded(`The job is estimated at ${usd(estimateMicro)}, over its max_price_usd of ${usd(maxPriceMicro)}.`);
  }
  const holds: Hold[] = [];
  const now = engine.clock.now();
  try {
    for (const scope of await scopesOf(engine, principal)) {
      if (scope.limits.budget_usd === null || estimateMicro === 0) continue;
      const budget = Math.round(scope.limits.budget_usd * 1e6);
      const r = await addHold(engine.kv, limitsStateKey(scope.id, 'budget'), estimateMicro, now + START_HOLD_MS, now, (item, live) => spentOf(item) + live <= budget);
      if ('refused' in r) {
        const left = Math.max(0, budget - spentOf(r.refused) - r.live);
        throw exceeded(`The job is estimated at ${usd(estimateMicro)}; ${scope.whose.toLowerCase()} AI budget has ${usd(left)} left.`);
      }
      holds.push(r.hold);
    }
  } catch (error) {
    await releaseEstimateHolds(engine, holds.map(asStored), 0);
    throw error;
  }
  return holds.map(asStored);
}

const asStored = (h: Hold): Job['budget_holds'][number] => ({ scope: String(h.key.pk), attr: h.attr, amount: h.amount });

/**
 * For the transaction that writes the job: the writes that move the start's holds (START_HOLD_MS) to
 * the job's lifetime (JOB_HOLD_MS), and the holds as the job then keeps them. Until it commits, the
 * holds lapse as the start's.
 */
export function keepEstimateHolds(holds: Job['budget_holds'], nowMs: number): { writes: KvWrite[]; holds: Job['budget_holds'] } {
  const attr = bucketAttr(nowMs + JOB_HOLD_MS);
  return {
    writes: holds.map((h) => ({ update: { pk: h.scope, sk: 'budget' }, add: { [h.attr]: -h.amount, [attr]: h.amount } })),
    holds: holds.map((h) => ({ ...h, attr })),
  };
}

/** Gives back what is left of the estimate's holds once the job ended, having spent `spentMicro`. */
export async function releaseEstimateHolds(engine: Engine, holds: Job['budget_holds'], spentMicro: number): Promise<void> {
  await Promise.all(
    holds.map(async (h) => {
      const left = Math.max(0, h.amount - spentMicro);
      if (left > 0) await engine.kv.update({ key: { pk: h.scope, sk: 'budget' }, add: { [h.attr]: -left } }).catch((error) => log.warn('job budget hold not given back; it lapses', { error: String(error) }));
    }),
  );
}

/**
 * Marks the job's spend closed and answers what it had spent at that moment, one atomic update: a
 * settle ordered before it is counted in that amount (and took its share off the budgets' hold), one
 * after it finds `closed` and takes nothing off the hold, which is given back whole from that amount.
 * Without this a call in flight at a cancel took its cost off a hold already given back: below zero.
 */
export async function closeJobSpend(engine: Engine, job: Pick<Job, 'org' | 'job_id'>): Promise<number> {
  return spentOf(await engine.kv.update({ key: jobSpendKey(job.org, job.job_id), set: { closed: true } }));
}

/** Raised where a call would take the job past its max_price_usd, or the job has ended (a cancel). */
export class PriceLimitReached extends Error {
  override name = 'PriceLimitReached';
}

/** What the gateway calls around each of a job's upstream calls instead of the budgets' own hold (ai/limits.ts). */
export interface JobBudget {
  /** Before the call: its worst cost fits what is left of max_price_usd, or PriceLimitReached. */
  reserve(worstMicro: number, holdUntilMs: number): Promise<{ settle(costMicro: number): Promise<void> }>;
}

export function jobBudget(engine: Engine, job: Pick<Job, 'org' | 'job_id' | 'request' | 'budget_holds' | 'estimate_micro'>): JobBudget {
  const key = jobSpendKey(job.org, job.job_id);
  const max = job.request.max_price_micro;
  return {
    async reserve(worstMicro, holdUntilMs) {
      const now = engine.clock.now();
      const r = await addHold(engine.kv, key, worstMicro, holdUntilMs, now, (item, live) => item.closed !== true && spentOf(item) + live <= max);
      if ('refused' in r) {
        // Ended meanwhile (a cancel is seen by the step's lease only every 20 s): no call after it.
        if (r.refused.closed === true) throw new PriceLimitReached('The job has ended; no call is made after it.');
        throw new PriceLimitReached(`The next call could cost up to ${usd(worstMicro)}; with ${usd(spentOf(r.refused))} spent it would pass max_price_usd ${usd(max)}.`);
      }
      let settled = false;
      return {
        async settle(costMicro) {
          if (settled) return;
          settled = true;
          const after = await releaseHold(engine.kv, r.hold, costMicro > 0 ? { spent: costMicro } : {});
          if (costMicro <= 0) return;
          // The job ended before this cost arrived: its hold was given back whole then; only `spent` grows.
          if (after.closed === true) {
            await Promise.all(job.budget_holds.map((h) => engine.kv.update({ key: { pk: h.scope, sk: 'budget' }, add: { spent: costMicro } })));
            return;
          }
          // The share of this cost still inside the estimate comes off the budgets' hold; past it, only `spent` grows.
          const total = spentOf(after);
          const inside = Math.max(0, Math.min(total, job.estimate_micro) - (total - costMicro));
          await Promise.all(
            job.budget_holds.map((h) => engine.kv.update({ key: { pk: h.scope, sk: 'budget' }, add: inside > 0 ? { spent: costMicro, [h.attr]: -inside } : { spent: costMicro } })),
          );
        },
      };
    },
  };
}

/** What the job has spent so far, micro-USD. */
export async function jobSpent(engine: Engine, job: Pick<Job, 'org' | 'job_id'>): Promise<number> {
  return spentOf(await engine.kv.get(jobSpendKey(job.org, job.job_id)));
}
