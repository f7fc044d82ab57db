/**
 * The EventBridge destination in AWS (docs/events/eventbridge.md): the webhook delivery function may
 * PutEvents on event buses, nothing else of EventBridge, and no other function may; the wildcard bus
 * grant carries its cdk-nag acknowledgement with the reason (the organization's allow-list in the table
 * is the check, and the delivery function reads it).
 */
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventBusKey } from '../../lambdas/events/eventbridge.js';
import { DELIVERY_READ_KEYS } from '../../lib/webhook-delivery.js';
import { actionsOf, allowedStatements, consumerFunction, leadingKeyPattern, nagFindings, routeFunctions, synthStack, taggedFunctions, flatTemplate } from './helpers.js';

let template: Template;
let stack: ReturnType<typeof synthStack>['stack'];

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
});

// The stack names its region (bin/app.ts), so CDK writes the partition out.
const BUSES = 'arn:aws:events:*:*:event-bus/*';

describe('the eventbridge destination grant', () => {
  it('gives the webhook delivery function events:PutEvents on event buses, and nothing else of EventBridge', () => {
    const statements = allowedStatements(template, consumerFunction(template, 'webhooks'));
    const events = statements.filter((s) => s.actions.some((a) => a.startsWith('events:')));
    expect(events).toEqual([{ actions: ['events:PutEvents'], resources: JSON.stringify(BUSES) }]);
  });

  it('lets the delivery function read the organizations\' allow-lists', () => {
    expect(DELIVERY_READ_KEYS.some((p) => leadingKeyPattern(p).test(eventBusKey('org_x', 'arn:aws:events:eu-west-1:123456789012:event-bus/b').pk))).toBe(true);
  });

  it('gives no other function any EventBridge action', () => {
    const fns = [...routeFunctions(template).entries(), ...[...taggedFunctions(template, 'platform:consumer').entries()].filter(([name]) => name !== 'webhooks')];
    for (const [name, fn] of fns) expect(actionsOf(allowedStatements(template, fn)).filter((a) => a.startsWith('events:')), name).toEqual([]);
  });

  it('acknowledges the wildcard bus for cdk-nag with its reason, and leaves no finding on the delivery function', () => {
    const metadata = JSON.stringify(stack.node.findAll().flatMap((c) => c.node.metadata));
    expect(metadata).toContain('AwsSolutions-IAM5[Resource::arn:aws:events:*:*:event-bus/*]');
    expect(metadata).toContain("checks that allow-list in the table before every PutEvents");
    const { app } = synthStack({ nag: true });
    // Only this construct's findings (stack.test.ts holds the whole stack to none): an error elsewhere
    // fails the synthesis with the report in its message.
    let paths: string[];
    try {
      paths = nagFindings(app).flatMap((v) => (v.violatingConstructs ?? []).map((c) => `${v.ruleName} ${c.constructPath}`));
    } catch (error) {
      paths = String((error as Error).message).split('\n');
    }
    expect(paths.filter((p) => p.includes('WebhookDelivery/Delivery'))).toEqual([]);
  });
});
