import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { CDK_JSON_CONTEXT } from './helpers.js';

/** aws-cdk-lib's recommended value of every feature flag (what `cdk init` writes, what `cdk flags` compares with). */
const RECOMMENDED = JSON.parse(readFileSync(createRequire(import.meta.url).resolve('aws-cdk-lib/recommended-feature-flags.json'), 'utf8')) as Record<string, unknown>;

/** The flags cdk.json sets against the recommendation, each for a reason in docs/decisions/stack-layout.md. */
const AGAINST_RECOMMENDATION = ['@aws-cdk/aws-iam:minimizePolicies', '@aws-cdk/core:enableAdditionalMetadataCollection'];

describe('CDK feature flags', () => {
  it('sets every flag whose recommended value is not CDK’s default, so none is left to a default by accident', () => {
    // A flag recommended `false` is off when unset; every other one must be chosen in cdk.json.
    const unset = Object.entries(RECOMMENDED).filter(([flag, value]) => value !== false && !(flag in CDK_JSON_CONTEXT));
    expect(unset.map(([flag]) => flag)).toEqual([]);
  });

  it('follows the recommendation except for the flags chosen otherwise on purpose', () => {
    const against = Object.keys(CDK_JSON_CONTEXT).filter((flag) => flag in RECOMMENDED && JSON.stringify(RECOMMENDED[flag]) !== JSON.stringify(CDK_JSON_CONTEXT[flag]));
    expect(against.sort()).toEqual([...AGAINST_RECOMMENDATION].sort());
  });
});
