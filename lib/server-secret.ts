import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import type { IGrantable } from 'aws-cdk-lib/aws-iam';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { acknowledgeUnrotatedSecret } from './nag.js';

/**
 * The server secret (lambdas/engine/aws/secret.ts): 64 generated characters in Secrets Manager, from
 * which a key per purpose derives (lambdas/shared/server-keys.ts): list cursors, webhook signing
 * secrets at rest. Only routes with the `secret:read` grant may read it.
 */
export class ServerSecret extends Construct {
  readonly secret: Secret;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.secret = new Secret(this, 'Secret', {
      description: `${Stack.of(this).stackName}: seals list cursors and webhook signing secrets (lambdas/shared/server-keys.ts)`,
      generateSecretString: { passwordLength: 64, excludePunctuation: true, includeSpace: false },
      // Deleting it would void every cursor in clients' hands and every stored webhook signing secret.
      removalPolicy: RemovalPolicy.RETAIN,
    });
    acknowledgeUnrotatedSecret(this.secret);
  }

  grantRead(grantee: IGrantable): void {
    this.secret.grantRead(grantee);
  }
}
