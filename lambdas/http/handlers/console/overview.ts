import { httpHandler } from '../../handler.js';
import { flushActivityEverywhere } from '../../../activity/activity.js';
import { listActivity } from '../../../activity/listing.js';
import { AiOrgSettings, FEATURES } from '../../../ai/org-settings.js';
import { budgetState, orgScope } from '../../../ai/limits.js';

const HOUR_MS = 3600_000;
const HOURS = 7 * 24;
/** At most this many pages of 500 events are read (the log's own scan budget bounds each): past them the series says `truncated`. */
const MAX_PAGES = 20;

/**
 * GET /console/api/overview: the last 7 days by hour, read from the activity log (docs/decisions/ai-usage.md):
 * `calls` the public APIs' calls (`api.call` events), `tokens` and `spend_usd` from the `ai.usage`
 * events; the organization's AI limits with its budget spent, and its feature switches.
 */
export const handler = httpHandler('console.overview.get', async (_req, { engine, principal }) => {
  const org = principal.organizationId;
  const now = engine.clock.now();
  const first = Math.floor(now / HOUR_MS) * HOUR_MS - (HOURS - 1) * HOUR_MS;
  const usage = Array.from({ length: HOURS }, (_, i) => ({ hour: new Date(first + i * HOUR_MS).toISOString(), calls: 0, ai_calls: 0, tokens: 0, spend_usd: 0 }));
  await flushActivityEverywhere(engine);
  let after: string | undefined;
  let pages = 0;
  let truncated = false;
  for (;;) {
    const page = await listActivity(engine.kv, { organizationId: org, applicationId: null }, { from: first, to: now + 1, kinds: ['api.call', 'ai.usage'], file_sha256: null }, { limit: 500, after, now });
    for (const event of page.items) {
      const point = usage[Math.floor((event.at_ms - first) / HOUR_MS)];
      if (!point) continue;
      if (event.kind === 'api.call' && event.source !== ('console' as string)) point.calls++;
      if (event.kind === 'ai.usage') {
        point.ai_calls++;
        point.tokens += event.usage?.total_tokens ?? 0;
        point.spend_usd += event.usage?.cost_usd ?? 0;
      }
    }
    if (page.after === null) break;
    if (++pages >= MAX_PAGES) {
      truncated = true;
      break;
    }
    after = page.after;
  }
  for (const point of usage) point.spend_usd = Math.round(point.spend_usd * 1e6) / 1e6;
  const settings = await new AiOrgSettings(engine.kv, () => engine.clock.now()).get(org);
  return {
    status: 200,
    body: {
      usage,
      truncated,
      limits: { ...settings.limits, budget: await budgetState(engine.kv, orgScope(org), now) },
      features: Object.fromEntries(FEATURES.map((f) => [f, !settings.disabled_features.includes(f)])),
    },
  };
});
