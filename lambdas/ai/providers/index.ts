/** The chat and embeddings providers by name: a new provider is one folder and one line here. */
import { PlatformError } from '../../shared/errors.js';
import type { ModelRoute, Provider } from '../model-routes.js';
import type { ModelProvider } from '../types.js';
import { openAiCompatible } from './openai-compatible/index.js';

/**
 * A provider loaded at its first call: its module (Bedrock's SDK client, its event-stream codec) is
 * evaluated only by a function that calls such a route, not at every AI function's cold start.
 */
function loadedOnUse(load: () => Promise<ModelProvider>): ModelProvider {
  return {
    chat: async (call, body) => (await load()).chat(call, body),
    async *chatStream(call, body) {
      yield* (await load()).chatStream(call, body);
    },
    embed: async (call, body) => (await load()).embed(call, body),
  };
}

const PROVIDERS: Partial<Record<Provider, ModelProvider>> = {
  'openai-compatible': openAiCompatible,
  bedrock: loadedOnUse(() => import('./bedrock/index.js').then((m) => m.bedrock)),
};

export function providerOf(route: ModelRoute): ModelProvider {
  const provider = PROVIDERS[route.provider];
  if (!provider) throw new PlatformError('route_unavailable', `The route "${route.id}" (provider ${route.provider}) does not serve ${route.endpoint}.`);
  return provider;
}
