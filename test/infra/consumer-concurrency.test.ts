/**
 * A small account lowers the queue consumers' concurrency without editing code: the CDK context value
 * `consumerMaxConcurrency` (`-c consumerMaxConcurrency=2`, or cdk.json) caps every SQS event source
 * mapping's MaximumConcurrency; unset, each keeps its own; a value a mapping cannot take stops
 * synthesis naming the value (docs/deploying.md, section 1).
 */
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { PlatformStack } from '../../lib/platform-stack.js';
import { CONSUMER_MAX_CONCURRENCY_CONTEXT } from '../../lib/consumer-concurrency.js';
import { CDK_JSON_CONTEXT, NO_BUNDLING, TEST_REGION } from './helpers.js';

function synth(context: Record<string, unknown> = {}): PlatformStack {
  const app = new App({ context: { ...CDK_JSON_CONTEXT, ...NO_BUNDLING, ...context } });
  return new PlatformStack(app, 'PlatformStack', { env: { region: TEST_REGION } });
}

/** Every SQS event source mapping's MaximumConcurrency, by logical id (they all sit in the parent stack). */
function concurrencies(stack: PlatformStack): Record<string, number> {
  const mappings = Template.fromStack(stack).findResources('AWS::Lambda::EventSourceMapping') as Record<string, { Properties: { ScalingConfig?: { MaximumConcurrency?: number } } }>;
  return Object.fromEntries(Object.entries(mappings).map(([id, m]) => [id, m.Properties.ScalingConfig?.MaximumConcurrency as number]));
}

describe('the queue consumers’ concurrency', () => {
  let own: Record<string, number>;
  beforeAll(() => {
    own = concurrencies(synth());
  }, 240_000);

  it('is each consumer’s own without the context value, every one bounded', () => {
    expect(Object.keys(own).length).toBeGreaterThanOrEqual(4);
    for (const [id, value] of Object.entries(own)) {
      expect(value, id).toBeGreaterThanOrEqual(2);
      expect(value, id).toBeLessThanOrEqual(1000);
    }
    // Above the floor, so a cap of 2 below has something to lower.
    expect(Math.max(...Object.values(own))).toBeGreaterThan(2);
  });

  // Each synthesis takes seconds, and a minute on a loaded machine.
  it('is capped by `-c consumerMaxConcurrency=2` (a string, as the CLI passes it) on every mapping', { timeout: 240_000 }, () => {
    const capped = concurrencies(synth({ [CONSUMER_MAX_CONCURRENCY_CONTEXT]: '2' }));
    expect(Object.keys(capped).sort()).toEqual(Object.keys(own).sort());
    for (const value of Object.values(capped)) expect(value).toBe(2);
  });

  it('lowers only the consumers above the cap (a number, as cdk.json gives it)', { timeout: 240_000 }, () => {
    const cap = 8;
    const capped = concurrencies(synth({ [CONSUMER_MAX_CONCURRENCY_CONTEXT]: cap }));
    expect(capped).toEqual(Object.fromEntries(Object.entries(own).map(([id, value]) => [id, Math.min(value, cap)])));
    expect(Object.values(own).some((v) => v < cap)).toBe(true);
  });

  it.each(['1', '1001', 'abc', '2.5', -3])('refuses %j, naming the context value and the range', (value) => {
    expect(() => synth({ [CONSUMER_MAX_CONCURRENCY_CONTEXT]: value })).toThrow(/context consumerMaxConcurrency=.*must be a whole number from 2 to 1000/);
  });
});
