import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { PlatformStack } from '../lib/platform-stack.js';

const app = new App();
new PlatformStack(app, 'PlatformStack');
// cdk-nag 3 is a policy validation plugin: findings fail `cdk synth` unless acknowledged with a reason.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
