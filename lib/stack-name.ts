import { Stack } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * The name of the stack a user deploys (`PlatformStack`), also from inside a nested stack, whose own
 * name is a token CloudFormation generates: function names, API names and the upstream keys' secret
 * prefix are built from it, so they stay the same wherever a construct lives.
 */
export function platformStackName(scope: IConstruct): string {
  let stack = Stack.of(scope);
  while (stack.nestedStackParent) stack = stack.nestedStackParent;
  return stack.stackName;
}
