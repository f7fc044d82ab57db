/** Runs work handed over as HttpResponse.afterAnswer: it never rejects, whatever the runtime; a failure is logged. */
import { log } from '../shared/log.js';

export function runAfterAnswer(task: () => Promise<void>, routeId?: string): Promise<void> {
  return task().catch((error) => log.error('after-answer task failed', { route: routeId, error: String(error) }));
}
