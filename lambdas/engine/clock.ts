import type { Clock } from './ports.js';

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/** A clock that moves only when told; `sleep` resolves once `advance` passes its deadline. */
export class ManualClock implements Clock {
  private sleepers: { until: number; resolve: () => void }[] = [];
  constructor(private current = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current;
  }
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.sleepers.push({ until: this.current + ms, resolve });
    });
  }
  advance(ms: number): void {
    this.current += ms;
    const due = this.sleepers.filter((s) => s.until <= this.current);
    this.sleepers = this.sleepers.filter((s) => s.until > this.current);
    for (const s of due) s.resolve();
  }
}
