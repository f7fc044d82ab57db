/** The Events service suite on the embedded engine, through the local server (see the contract). */
import { startTestPlatform } from '../helpers/platform.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { eventsServiceContract } from '../contract/events-service-contract.js';

eventsServiceContract('embedded (SQLite)', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
  const p = await startTestPlatform({ clock });
  return { ...p, clock };
});
