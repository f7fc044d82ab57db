/** Upstream API keys locally: the environment variable a route names (`route set --api-key-env NAME`). */
import type { UpstreamKeys } from '../ports.js';
import { environmentValue } from '../../shared/settings.js';

export class EnvironmentUpstreamKeys implements UpstreamKeys {
  async get(name: string): Promise<string | undefined> {
    return environmentValue(name);
  }
}
