/** What the `upstream-keys:read` grant gives a function in AWS: the upstream keys' secrets and Bedrock's models, and nothing else. */
import { ArnFormat, Stack } from 'aws-cdk-lib';
import { PolicyStatement, type Role } from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { platformStackName } from './stack-name.js';

/**
 * Where model routes' upstream API keys live in AWS: a route's `api_key_env` (`route set
 * --api-key-env NAME`) names a Secrets Manager secret, and functions may read only secrets named
 * `<stack name>/ai-upstream/...` (docs/decisions/ai-streaming-aws.md).
 */
export const UPSTREAM_KEY_PREFIX = 'ai-upstream/';
export const upstreamKeyPrefix = (scope: Construct) => `${platformStackName(scope)}/${UPSTREAM_KEY_PREFIX}`;

/** The secrets `upstream-keys:read` may read: the prefix's, whatever their random ARN suffix. */
export const upstreamKeyArn = (scope: Construct) =>
  Stack.of(scope).formatArn({ service: 'secretsmanager', resource: 'secret', resourceName: `${upstreamKeyPrefix(scope)}*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME });

/** What the Bedrock provider calls: Converse/InvokeModel, ConverseStream/InvokeModelWithResponseStream. */
export const BEDROCK_ACTIONS = ['bedrock:InvokeModel', 'bedrock:InvokeModelWithResponseStream'];

/**
 * Foundation models in any region (a cross-region inference profile sends the call to another
 * region's model, authorized there on the model's ARN) and the account's inference profiles in the
 * stack's region. No provisioned throughput, custom or imported models, agents or guardrails.
 */
export const bedrockArns = (scope: Construct) => {
  const stack = Stack.of(scope);
  return [
    `arn:${stack.partition}:bedrock:*::foundation-model/*`,
    stack.formatArn({ service: 'bedrock', resource: 'inference-profile', resourceName: '*', arnFormat: ArnFormat.SLASH_RESOURCE_NAME }),
  ];
};

/**
 * `upstream-keys:read`: what calling a model route's upstream needs in AWS. The openai-compatible
 * provider reads its key (Secrets Manager, under the prefix only); the Bedrock provider signs with
 * the function's role (bedrock:InvokeModel*). Secrets encrypted with the account's default key
 * (aws/secretsmanager) need no KMS grant.
 */
export function grantUpstreams(role: Role): void {
  role.addToPrincipalPolicy(new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [upstreamKeyArn(role)] }));
  role.addToPrincipalPolicy(new PolicyStatement({ actions: BEDROCK_ACTIONS, resources: bedrockArns(role) }));
}

/**
 * `rerankers:call`: Bedrock's Rerank API (a rerank profile of provider `bedrock`). IAM authorizes
 * `bedrock:Rerank` on no resource of its own (`*`); the model it runs is authorized by
 * bedrock:InvokeModel on the model's ARN, which `upstream-keys:read` grants.
 */
export function grantRerankers(role: Role): void {
  role.addToPrincipalPolicy(new PolicyStatement({ actions: ['bedrock:Rerank'], resources: ['*'] }));
}
