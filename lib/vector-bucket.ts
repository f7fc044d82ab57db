import { Fn, RemovalPolicy } from 'aws-cdk-lib';
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
