/**
 * The server secret in Secrets Manager (the stack generates it; SERVER_SECRET_ARN names it). Read once
 * per container: a container that cannot read it retries on its next call rather than caching the
 * failure.
 */
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { ServerSecret } from '../ports.js';
import { memoUntilFailure } from '../adapter-kit/memo.js';
import { callAws } from './errors.js';

/** The stack generates 64 characters; anything much shorter is a misconfiguration, not a secret. */
const MIN_SECRET_BYTES = 32;

export class SecretsManagerSecret implements ServerSecret {
  constructor(private readonly client: SecretsManagerClient, private readonly secretId: string) {}

  readonly get = memoUntilFailure(() => this.load());

  private async load(): Promise<Uint8Array> {
    const out = await callAws('Secrets Manager GetSecretValue', () => this.client.send(new GetSecretValueCommand({ SecretId: this.secretId })));
    const bytes = out.SecretBinary ?? (out.SecretString === undefined ? undefined : new TextEncoder().encode(out.SecretString));
    if (!bytes || bytes.byteLength < MIN_SECRET_BYTES) throw new Error(`server secret ${this.secretId} holds fewer than ${MIN_SECRET_BYTES} bytes`);
    return bytes;
  }
}
