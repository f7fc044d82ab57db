import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { AiOrgSettings, FEATURES } from '../../../ai/org-settings.js';
import { body } from './shared.js';
import { adminCall } from './owned.js';

/** `{vector: false, knowledge: true}`: each feature named is switched off or on; one not named keeps its state. */
const Switches = z.strictObject(Object.fromEntries(FEATURES.map((f) => [f, z.optional(z.boolean())])) as Record<(typeof FEATURES)[number], z.ZodMiniOptional<z.ZodMiniBoolean>>);

/**
 * PUT /console/api/features (admin): the organization's feature switches, as `org features --disable
 * --enable` sets them (a switched-off feature answers its 403 and keeps its data). Answers the AI settings.
 */
export const handler = httpHandler('console.features.update', async (req, { engine, principal }) => {
  const switches = Object.entries(body(Switches, req)).filter(([, v]) => v !== undefined);
  const disable = switches.filter(([, on]) => on === false).map(([f]) => f);
  const enable = switches.filter(([, on]) => on === true).map(([f]) => f);
  const settings = await adminCall(() => new AiOrgSettings(engine.kv, () => engine.clock.now()).setFeatures(principal.organizationId, { disable, enable }));
  return { status: 200, body: settings };
});
