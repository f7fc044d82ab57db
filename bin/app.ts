import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { PlatformStack } from '../lib/platform-stack.js';
import { settings } from '../lambdas/shared/settings.js';

const app = new App();
// A region known at synthesis: the Data distribution's upload relay is a Lambda@Edge function, which
// CDK places in us-east-1 (a stack of its own there when the platform's region is another). The CLI
// sets CDK_DEFAULT_REGION from the profile or AWS_REGION; without one, us-east-1.
const { cdkDefaultAccount, cdkDefaultRegion } = settings();
new PlatformStack(app, 'PlatformStack', { env: { account: cdkDefaultAccount, region: cdkDefaultRegion ?? 'us-east-1' } });
// cdk-nag 3 is a policy validation plugin: findings fail `cdk synth` unless acknowledged with a reason.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
