import { Stack } from 'aws-cdk-lib';
import { Dashboard, GraphWidget, Stats, TextWidget, type IMetric } from 'aws-cdk-lib/aws-cloudwatch';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import { Construct } from 'constructs';
import type { QueueName } from '../lambdas/engine/queues.js';
import { ALARM_PERIOD, socketMetric } from './alarms.js';
import type { Queues } from './queues.js';
import { platformStackName } from './stack-name.js';

export interface PlatformDashboardProps {
  /** Each HTTP API by its name: the three of HTTP_APIS and the console's. */
  readonly httpApis: Readonly<Record<string, HttpApi>>;
  readonly socket: { readonly apiId: string; readonly stage: string };
  readonly queues: Queues;
}

/** `<stack>-<region>`: a dashboard's name is global to the account. */
export const dashboardName = (scope: Construct) => `${platformStackName(scope)}-${Stack.of(scope).region}`;

const WIDTH = 8;
const graph = (title: string, left: IMetric[]) => new GraphWidget({ title, left, width: WIDTH, height: 6 });

/**
 * One CloudWatch dashboard (`<stack>-<region>`): a row per API with its calls, latency p50 / p99 and 4xx / 5xx,
 * the WebSocket API's connects, messages and failures, and a row per queue with its depth, the age of
 * its oldest message and its dead-letter depth.
 */
export class PlatformDashboard extends Construct {
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: PlatformDashboardProps) {
    super(scope, id);
    const period = ALARM_PERIOD;
    // Dashboards are per account, not per region: the region in the name lets two regions deploy.
    this.dashboard = new Dashboard(this, 'Dashboard', { dashboardName: dashboardName(this) });
    this.dashboard.addWidgets(new TextWidget({ markdown: `# ${Stack.of(this).stackName}\nAlarms and what to do: docs/decisions/operations.md`, width: 24, height: 2 }));
    for (const [api, httpApi] of Object.entries(props.httpApis)) {
      const sum = { statistic: Stats.SUM, period };
      this.dashboard.addWidgets(
        graph(`${api} API: calls`, [httpApi.metricCount({ ...sum, label: 'calls' })]),
        graph(`${api} API: latency`, [httpApi.metricLatency({ statistic: Stats.percentile(50), period, label: 'p50' }), httpApi.metricLatency({ statistic: Stats.percentile(99), period, label: 'p99' })]),
        graph(`${api} API: errors`, [httpApi.metricClientError({ ...sum, label: '4xx' }), httpApi.metricServerError({ ...sum, label: '5xx' })]),
      );
    }
    const socket = (name: string, label: string) => socketMetric(props.socket.apiId, props.socket.stage, name).with({ label });
    this.dashboard.addWidgets(
      graph('events WebSocket: connects and messages', [socket('ConnectCount', 'connects'), socket('MessageCount', 'messages')]),
      graph('events WebSocket: latency', [
        socketMetric(props.socket.apiId, props.socket.stage, 'IntegrationLatency').with({ statistic: Stats.percentile(50), label: 'p50' }),
        socketMetric(props.socket.apiId, props.socket.stage, 'IntegrationLatency').with({ statistic: Stats.percentile(99), label: 'p99' }),
      ]),
      graph('events WebSocket: errors', [socket('ClientError', 'client errors'), socket('IntegrationError', 'integration errors'), socket('ExecutionError', 'failed executions')]),
    );
    for (const [name, { queue, deadLetterQueue }] of Object.entries(props.queues.byName) as [QueueName, (typeof props.queues.byName)[QueueName]][]) {
      const maximum = { statistic: Stats.MAXIMUM, period };
      this.dashboard.addWidgets(
        graph(`${name} queue: depth`, [queue.metricApproximateNumberOfMessagesVisible({ ...maximum, label: 'visible' }), queue.metricApproximateNumberOfMessagesNotVisible({ ...maximum, label: 'in flight' })]),
        graph(`${name} queue: oldest message (s)`, [queue.metricApproximateAgeOfOldestMessage({ ...maximum, label: 'age' })]),
        graph(`${name}-dead: depth`, [deadLetterQueue.metricApproximateNumberOfMessagesVisible({ ...maximum, label: 'dead letters' })]),
      );
    }
  }
}
