import { httpHandler } from '../../handler.js';
import { AiOrgSettings } from '../../../ai/org-settings.js';
import { budgetState, orgScope } from '../../../ai/limits.js';

/** GET /console/api/limits: the organization's AI settings (limits, feature switches, granted fields) and `budget {spent_usd, held_usd}`, as `org limits` shows them. */
export const handler = httpHandler('console.limits.get', async (_req, { engine, principal }) => {
  const org = principal.organizationId;
  const settings = await new AiOrgSettings(engine.kv, () => engine.clock.now()).get(org);
  return { status: 200, body: { ...settings, budget: await budgetState(engine.kv, orgScope(org), engine.clock.now()) } };
});
