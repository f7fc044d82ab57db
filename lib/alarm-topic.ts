import { ArnFormat, CfnCondition, CfnParameter, Fn, Stack } from 'aws-cdk-lib';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import { CfnSubscription, Topic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';

/** The stack parameter naming the address alarms are mailed to; empty (the default) subscribes nobody. */
export const ALARM_EMAIL_PARAMETER = 'AlarmEmail';

/**
 * The SNS topic every alarm of the stack notifies (docs/decisions/operations.md), encrypted with a key
 * of its own and reachable over TLS only. CloudWatch publishes to it as a service, so the key lets
 * CloudWatch encrypt (the AWS managed SNS key cannot be shared with it) and the topic lets CloudWatch
 * publish for this account's alarms only. An e-mail subscription exists only when `AlarmEmail` is
 * given; other subscribers (a pager, a chat hook) subscribe to the topic per deployment.
 */
export class AlarmTopic extends Construct {
  readonly topic: Topic;
  /** What an alarm's actions take: notify the topic. */
  readonly action: SnsAction;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const stack = Stack.of(this);
    const email = new CfnParameter(stack, ALARM_EMAIL_PARAMETER, {
      type: 'String',
      default: '',
      allowedPattern: '^$|^[^\\s@]+@[^\\s@]+$',
      description: 'E-mail address the alarms are sent to (it must confirm the subscription); empty: no e-mail subscription',
    });
    const hasEmail = new CfnCondition(this, 'HasAlarmEmail', { expression: Fn.conditionNot(Fn.conditionEquals(email.valueAsString, '')) });

    const key = new Key(this, 'Key', { description: `${stack.stackName}: encrypts the alarm topic`, enableKeyRotation: true });
    key.addToResourcePolicy(
      new PolicyStatement({ principals: [new ServicePrincipal('cloudwatch.amazonaws.com')], actions: ['kms:Decrypt', 'kms:GenerateDataKey*'], resources: ['*'] }),
    );
    this.topic = new Topic(this, 'Topic', { displayName: `${stack.stackName} alarms`, masterKey: key, enforceSSL: true });
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: {
          ArnLike: { 'aws:SourceArn': stack.formatArn({ service: 'cloudwatch', resource: 'alarm', resourceName: '*', arnFormat: ArnFormat.COLON_RESOURCE_NAME }) },
          StringEquals: { 'aws:SourceAccount': stack.account },
        },
      }),
    );
    const subscription = new CfnSubscription(this, 'Email', { topicArn: this.topic.topicArn, protocol: 'email', endpoint: email.valueAsString });
    subscription.cfnOptions.condition = hasEmail;
    this.action = new SnsAction(this.topic);
  }
}
