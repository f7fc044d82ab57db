/** The steps of a knowledge job (placeholder until the pipeline lands). */
import type { Engine } from '../../engine/ports.js';

export interface JobMessage {
  org: string;
  job: string;
  step: string;
  piece?: number;
}

export function parseJobMessage(body: string): JobMessage | undefined {
  try {
    const m = JSON.parse(body) as JobMessage;
    return typeof m.org === 'string' && typeof m.job === 'string' && typeof m.step === 'string' ? m : undefined;
  } catch {
    return undefined;
  }
}

export async function runJobMessage(_engine: Engine, _message: JobMessage): Promise<void> {}
