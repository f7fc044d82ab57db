/**
 * Upstream API keys in AWS: the Secrets Manager secret a route names (`api_key_env`, a secret name or
 * ARN), read once per container and kept; a failed read is not kept, the next call tries again.
 */
import { GetSecretValueCommand, ResourceNotFoundException, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { UpstreamKeys } from '../ports.js';
import { callAws } from './errors.js';

export class SecretsManagerUpstreamKeys implements UpstreamKeys {
  private readonly keys = new Map<string, Promise<string | undefined>>();

  constructor(private readonly client: SecretsManagerClient) {}

  get(name: string): Promise<string | undefined> {
    let key = this.keys.get(name);
    if (!key) {
      key = this.load(name);
      this.keys.set(name, key);
      key.catch(() => this.keys.delete(name));
    }
    return key;
  }

  private async load(name: string): Promise<string | undefined> {
    try {
      const out = await callAws('Secrets Manager GetSecretValue', () => this.client.send(new GetSecretValueCommand({ SecretId: name })));
      return out.SecretString || undefined;
    } catch (error) {
      if (error instanceof ResourceNotFoundException) return undefined;
      throw error;
    }
  }
}
