import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { AiOrgSettings } from '../../../ai/org-settings.js';
import { budgetState, checkLimits, orgScope } from '../../../ai/limits.js';
import { body } from './shared.js';
import { adminCall } from './owned.js';

const limit = z.optional(z.nullable(z.number()));
/** The limits to change; null lifts one, a field left out keeps it (as `org limits --rpm none`). */
const Limits = z.strictObject({ rpm: limit, tpm: limit, concurrency: limit, budget_usd: limit, knowledge_job_cap_usd: limit, knowledge_keep_source_hours: limit });

/** PUT /console/api/limits (admin): the organization's AI limits, checked by the same rules as `org limits` (`400 invalid_body` naming the field). */
export const handler = httpHandler('console.limits.update', async (req, { engine, principal }) => {
  const org = principal.organizationId;
  const limits = Object.fromEntries(Object.entries(body(Limits, req)).filter(([, v]) => v !== undefined));
  const settings = await adminCall(() => new AiOrgSettings(engine.kv, () => engine.clock.now()).setLimits(org, checkLimits(limits)));
  return { status: 200, body: { ...settings, budget: await budgetState(engine.kv, orgScope(org), engine.clock.now()) } };
});
