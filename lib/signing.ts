import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import { PolicyStatement, type IGrantable } from 'aws-cdk-lib/aws-iam';
import { Key, KeySpec, KeyUsage } from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';

/**
 * The token signing key: asymmetric KMS (ECC_NIST_P256, SIGN_VERIFY), so OAuth client and end-user
 * tokens are ES256 JWTs whose private key never leaves KMS (lambdas/engine/aws/signer.ts). Every
 * function verifies tokens (GetPublicKey); only functions with the `signing:sign` grant sign.
 */
export class SigningKey extends Construct {
  readonly key: Key;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.key = new Key(this, 'Key', {
      description: `${Stack.of(this).stackName}: signs OAuth client and end-user tokens (ES256)`,
      keySpec: KeySpec.ECC_NIST_P256,
      keyUsage: KeyUsage.SIGN_VERIFY,
      // Deleting the key would make every token issued so far unverifiable and cannot be undone.
      removalPolicy: RemovalPolicy.RETAIN,
      // No automatic rotation: KMS rotates symmetric keys only (cdk-nag KMS5 checks symmetric keys
      // only, too). Rotate by adding a new key first in SIGNING_KEY_IDS and retiring the old one later.
    });
  }

  /** SIGNING_KEY_IDS: the KMS key ids a function may sign and verify with, current first (JSON). */
  keyIdsJson(): string {
    return Stack.of(this).toJsonString([this.key.keyArn]);
  }

  /** Reading the public key, to verify tokens: this key only. */
  grantVerify(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(new PolicyStatement({ actions: ['kms:GetPublicKey'], resources: [this.key.keyArn] }));
  }

  /** Signing with the private key inside KMS: this key only. */
  grantSign(grantee: IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(new PolicyStatement({ actions: ['kms:Sign'], resources: [this.key.keyArn] }));
  }
}
