import { AiOrgSettings, type Feature } from '../../ai/org-settings.js';
import { PlatformError, type ErrorCode } from '../../shared/errors.js';
import type { Middleware } from '../types.js';

/** The refusal of each switched-off feature (`org features --disable <feature>`), where a route declares one. */
const REFUSALS: Partial<Record<Feature, { code: ErrorCode; message: string }>> = {
  knowledge: { code: 'knowledge_disabled', message: 'Knowledge jobs are disabled for this organization; its collections and other data are kept.' },
};

/**
 * Refuses a route of a feature the caller's organization switched off, after the credential and its
 * capability and before the operation id and the body (issue 36's order for knowledge jobs): the
 * setting is read through the AI settings' cache, as the operation id rule is.
 */
export function featureSwitch(options: { feature: Feature }): Middleware {
  const refusal = REFUSALS[options.feature];
  if (!refusal) throw new Error(`feature ${options.feature} has no refusal code`);
  return {
    before: async ({ context }) => {
      const { engine, principal } = context.platform;
      if (!engine || !principal) return;
      const settings = await new AiOrgSettings(engine.kv, () => engine.clock.now()).get(principal.organizationId);
      if (settings.disabled_features.includes(options.feature)) throw new PlatformError(refusal.code, refusal.message);
    },
  };
}
