/**
 * Upstream API keys of model routes (engine port UpstreamKeys): an environment variable locally, a
 * Secrets Manager secret in AWS (client mock), read once per process and kept; never the platform's data.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { GetSecretValueCommand, ResourceNotFoundException, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { EnvironmentUpstreamKeys } from '../../lambdas/engine/embedded/upstream-keys.js';
import { SecretsManagerUpstreamKeys } from '../../lambdas/engine/aws/upstream-keys.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';

describe('EnvironmentUpstreamKeys', () => {
  afterEach(() => {
    delete process.env.UPSTREAM_KEYS_TEST;
  });

  it('reads the named environment variable; unset or empty is no key', async () => {
    const keys = new EnvironmentUpstreamKeys();
    expect(await keys.get('UPSTREAM_KEYS_TEST')).toBeUndefined();
    process.env.UPSTREAM_KEYS_TEST = '';
    expect(await keys.get('UPSTREAM_KEYS_TEST')).toBeUndefined();
    process.env.UPSTREAM_KEYS_TEST = 'sk-local';
    expect(await keys.get('UPSTREAM_KEYS_TEST')).toBe('sk-local');
  });
});

describe('SecretsManagerUpstreamKeys (client mock)', () => {
  const sm = mockClient(SecretsManagerClient);
  afterEach(() => sm.reset());

  it('reads a secret once per process and keeps it', async () => {
    sm.on(GetSecretValueCommand, { SecretId: 'platform/ai-upstream/openai' }).resolves({ SecretString: 'sk-aws' });
    const keys = new SecretsManagerUpstreamKeys(new SecretsManagerClient({ region: 'us-east-1' }));
    expect(await Promise.all([keys.get('platform/ai-upstream/openai'), keys.get('platform/ai-upstream/openai')])).toEqual(['sk-aws', 'sk-aws']);
    expect(await keys.get('platform/ai-upstream/openai')).toBe('sk-aws');
    expect(sm.commandCalls(GetSecretValueCommand)).toHaveLength(1);
  });

  it('a missing secret is no key; a failed read is not kept, the next call tries again', async () => {
    sm.on(GetSecretValueCommand, { SecretId: 'missing' }).rejects(new ResourceNotFoundException({ message: 'no', $metadata: {} }));
    sm.on(GetSecretValueCommand, { SecretId: 'flaky' })
      .rejectsOnce(Object.assign(new Error('throttled'), { name: 'ThrottlingException', $metadata: { httpStatusCode: 429 } }))
      .resolves({ SecretString: 'sk-later' });
    const keys = new SecretsManagerUpstreamKeys(new SecretsManagerClient({ region: 'us-east-1' }));
    expect(await keys.get('missing')).toBeUndefined();
    await expect(keys.get('flaky')).rejects.toBeInstanceOf(EngineUnavailableError);
    expect(await keys.get('flaky')).toBe('sk-later');
  });
});
