/** What a knowledge job's step works with (pipeline.ts runs the steps; publish.ts is one). */
import type { Principal } from '../../auth/principal.js';
import type { Engine } from '../../engine/ports.js';
import type { Job, JobErrorCode } from './records.js';
import type { JobChat, StepMemo } from './types.js';

/** A job's own fault: it ends `failed` with this code. */
export class JobFailed extends Error {
  constructor(
    readonly code: JobErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'JobFailed';
  }
}

export interface StepContext {
  engine: Engine;
  job: Job;
  /** The credential that started the job: its calls run as it. */
  principal: Principal;
  /** Aborted when the job is cancelled or taken over. */
  signal: AbortSignal;
  /** Each paid call's result, stored once: a step run again gets it back without paying again. */
  memo: StepMemo;
  chat: JobChat;
  /** Blob key of a file of the job's own. */
  blob(name: string): string;
  /** Throws past the step's time budget (before new work, never mid-call): the step then runs again. */
  checkTime(): void;
}
