import { Fn, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import { PolicyStatement, type IGrantable } from 'aws-cdk-lib/aws-iam';
import { CfnVectorBucket } from 'aws-cdk-lib/aws-s3vectors';
import { Construct } from 'constructs';

/**
 * What each vectors grant may do (lambdas/engine/aws/vectors.ts makes exactly these calls), on the
 * indexes of the one vector bucket. A query with a filter or with metadata returned (every query of
 * the adapter) needs GetVectors beside QueryVectors; every index action is authorized on the index
 * ARN, none on the bucket's (Service Authorization Reference, Amazon S3 Vectors).
 */
export const VECTOR_ACTIONS = {
  read: ['s3vectors:QueryVectors', 's3vectors:GetVectors', 's3vectors:GetIndex'],
  /** The vector database's writes, its index made and removed with it (`vector-db create` / delete). */
  write: ['s3vectors:PutVectors', 's3vectors:DeleteVectors', 's3vectors:CreateIndex', 's3vectors:DeleteIndex', 's3vectors:GetIndex'],
} as const;

/**
 * The regions Amazon S3 Vectors is offered in: the stack deploys only there (its vector bucket is an
 * S3 Vectors resource). Source: "AWS Regions, endpoints, and quotas for S3 Vectors",
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-vectors-regions-quotas.html, checked
 * 2026-12-02 (14 regions). A region AWS adds later is refused until it is added here.
 */
export const S3_VECTORS_REGIONS = [
  'us-east-1',
  'us-east-2',
  'us-west-2',
  'ca-central-1',
  'eu-central-1',
  'eu-west-1',
  'eu-west-2',
  'eu-west-3',
  'eu-north-1',
  'ap-south-1',
  'ap-southeast-1',
  'ap-southeast-2',
  'ap-northeast-1',
  'ap-northeast-2',
] as const;

/** Refuses, at synthesis, a stack whose region has no S3 Vectors; a stack without a region (a token) cannot be checked and is let through. */
export function assertS3VectorsRegion(scope: Construct): void {
  const { region } = Stack.of(scope);
  if (Token.isUnresolved(region) || (S3_VECTORS_REGIONS as readonly string[]).includes(region)) return;
  throw new Error(
    `Amazon S3 Vectors is not offered in ${region}, and the platform keeps its vector databases there: deploy to one of ${S3_VECTORS_REGIONS.join(', ')} (AWS_REGION). The list is S3_VECTORS_REGIONS in lib/vector-bucket.ts; if AWS has added ${region} since, add it there.`,
  );
}

/**
 * The Amazon S3 Vectors vector bucket of the vector databases: one index per database, made by the
 * `vector-db create` path. Encrypted with SSE-S3 as the blob bucket is; kept when the stack is
 * deleted, as the table and the blob bucket are (docs/decisions/vector-index-aws.md).
 */
export class VectorBucket extends Construct {
  readonly resource: CfnVectorBucket;
  readonly bucketArn: string;
  /** The name the adapter addresses (VECTOR_BUCKET_NAME), from the ARN: `arn:...:bucket/<name>`. */
  readonly bucketName: string;
  /** Every index of the bucket: what the grants name. */
  readonly indexArns: string;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    assertS3VectorsRegion(this);
    this.resource = new CfnVectorBucket(this, 'Bucket', { encryptionConfiguration: { sseType: 'AES256' } });
    this.resource.applyRemovalPolicy(RemovalPolicy.RETAIN);
    this.bucketArn = this.resource.attrVectorBucketArn;
    this.bucketName = Fn.select(1, Fn.split('/', this.bucketArn));
    this.indexArns = `${this.bucketArn}/index/*`;
  }

  /** One statement: the actions of the grants asked for (GetIndex once when both are). */
  grant(grantee: IGrantable, access: { read?: boolean; write?: boolean }): void {
    const actions = [...new Set([...(access.read ? VECTOR_ACTIONS.read : []), ...(access.write ? VECTOR_ACTIONS.write : [])])];
    if (actions.length) grantee.grantPrincipal.addToPrincipalPolicy(new PolicyStatement({ actions, resources: [this.indexArns] }));
  }
}
