/**
 * The blob bucket's lifecycle (lib/storage.ts): abandoned multipart uploads are aborted, and objects
 * left on the staging prefix (a crashed function's, a dead-lettered upload check's joined file) expire,
 * while nothing outside that prefix ever does.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { STAGING_PREFIX } from '../../lambdas/engine/aws/staging.js';
import { STAGING_EXPIRY_DAYS, Storage } from '../../lib/storage.js';

describe('the blob bucket', () => {
  it('aborts abandoned multipart uploads and expires staged objects, and only those', () => {
    const stack = new Stack(new App(), 'Storage');
    new Storage(stack, 'Storage');
    const buckets = Object.values(Template.fromStack(stack).findResources('AWS::S3::Bucket')) as { Properties: Record<string, any> }[];
    const blobs = buckets.find((b) => b.Properties.LoggingConfiguration)!;
    const rules = blobs.Properties.LifecycleConfiguration.Rules as Record<string, any>[];
    expect(rules).toEqual([
      { AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 }, Status: 'Enabled' },
      { Prefix: STAGING_PREFIX, ExpirationInDays: STAGING_EXPIRY_DAYS, Status: 'Enabled' },
    ]);
  });
});
