/** The chat and embeddings providers by name: a new provider is one folder and one line here. */
import { PlatformError } from '../../shared/errors.js';
import type { ModelRoute, Provider } from '../model-routes.js';
import type { ModelProvider } from '../types.js';
import { bedrock } from './bedrock/index.js';
import { openAiCompatible } from './openai-compatible/index.js';

const PROVIDERS: Partial<Record<Provider, ModelProvider>> = {
  'openai-compatible': openAiCompatible,
  bedrock,
};

export function providerOf(route: ModelRoute): ModelProvider {
  const provider = PROVIDERS[route.provider];
  if (!provider) throw new PlatformError('route_unavailable', `The route "${route.id}" (provider ${route.provider}) does not serve ${route.endpoint}.`);
  return provider;
}
