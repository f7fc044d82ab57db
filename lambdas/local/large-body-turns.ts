/**
 * Large JSON bodies on the local server, one organization's at a time per process, and at most a
 * quarter of the process's time while other organizations are being served
 * (docs/decisions/serving-fairness.md). Only on routes that store their body (RouteDef.storesBody):
 * a route that waits on an upstream would hold the turn for the upstream's time.
 * One process serves every organization here, so an organization sending many large bodies at once
 * (600 items of 200 KB, four in flight) would fill the event loop and the cores with their parsing
 * and writes, and every other organization's request would wait behind them. Each organization gets
 * one large body in hand at a time; its others wait their turn in the order they came; and while
 * another organization was served within the last second, each turn is followed by a pause of
 * PAUSE_FACTOR times the turn's own length, so large bodies of one organization take at most a quarter
 * of the process's time from the others. An organization alone on the process is never paused.
 */
import { PlatformError } from '../shared/errors.js';

export const PAUSE_FACTOR = 3;
/**
 * Large bodies of one organization that may wait for its turn in one process: each is held in memory
 * while it waits (up to the route's body limit), so past this the next is `429 rate_limited`.
 */
export const MAX_WAITING = 32;
/** A body this large (64 KiB) waits its organization's turn. */
export const LARGE_BODY_BYTES = 64 * 1024;

export class LargeBodyTurns {
  /** Organizations with a large body in hand, and who of theirs waits next. */
  private readonly waiting = new Map<string, Array<() => void>>();
  /** When each organization's last request ended here (ms, performance.now()). */
  private readonly lastSeen = new Map<string, number>();
  private readonly unreported = new Set<string>();

  constructor(
    private readonly now: () => number = () => performance.now(),
    /** How long another organization counts as being served after its last request ended. */
    private readonly othersWindowMs = 1_000,
  ) {}

  /** Resolves with the turn's release once `organizationId`'s earlier large bodies (and their pauses) are done. */
  take(organizationId: string): Promise<() => void> {
    const queue = this.waiting.get(organizationId);
    if (!queue) {
      this.waiting.set(organizationId, []);
      return Promise.resolve(this.releaser(organizationId));
    }
    if (queue.length >= MAX_WAITING) {
      return Promise.reject(new PlatformError('rate_limited', `This organization already has ${MAX_WAITING} large bodies waiting on this server; retry shortly.`, { retryAfterSeconds: 1 }));
    }
    return new Promise((resolve) => queue.push(() => resolve(this.releaser(organizationId))));
  }

  /**
   * A request of `organizationId` ended (any size): others' turns pause while it is being served.
   * `here`: in this process; false for what another serving process reported (takeSeen).
   */
  seen(organizationId: string, here = true): void {
    this.lastSeen.set(organizationId, this.now());
    if (here && this.unreported.size < 100) this.unreported.add(organizationId);
    // Bounded: forget organizations not seen for a while (checked when the map grows).
    if (this.lastSeen.size > 1_000) {
      const before = this.now() - this.othersWindowMs;
      for (const [org, at] of this.lastSeen) if (at < before) this.lastSeen.delete(org);
    }
  }

  /**
   * The organizations seen here since the last call (at most 100), for the other serving processes:
   * with several, one organization's large bodies may land on one process and another's requests on
   * another, and the pause must hold in both (lambdas/local/workers.ts passes them on).
   */
  takeSeen(): string[] {
    const out = [...this.unreported];
    this.unreported.clear();
    return out;
  }

  /** Organizations holding a turn or waiting out its pause (for tests). */
  get holders(): number {
    return this.waiting.size;
  }

  private othersServed(organizationId: string): boolean {
    const since = this.now() - this.othersWindowMs;
    for (const [org, at] of this.lastSeen) if (org !== organizationId && at >= since) return true;
    return false;
  }

  private releaser(organizationId: string): () => void {
    const admittedAt = this.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const pause = this.othersServed(organizationId) ? (this.now() - admittedAt) * PAUSE_FACTOR : 0;
      if (pause >= 1) setTimeout(() => this.next(organizationId), pause).unref();
      else this.next(organizationId);
    };
  }

  private next(organizationId: string): void {
    const next = this.waiting.get(organizationId)!.shift();
    if (next) next();
    else this.waiting.delete(organizationId);
  }
}

/** This process's turns: the three APIs' servers share the event loop, so they share the turns. */
export const largeBodyTurns = new LargeBodyTurns();
