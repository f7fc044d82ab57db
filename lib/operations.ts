import type { IAlarmAction } from 'aws-cdk-lib/aws-cloudwatch';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import type { QueueName } from '../lambdas/engine/queues.js';
import { functionAlarm, queueAlarms, socketApiAlarm, tableAlarm } from './alarms.js';
import { PlatformDashboard } from './dashboard.js';
import { ENTRY_METADATA } from './function-defaults.js';
import type { Queues } from './queues.js';

export interface OperationsProps {
  readonly alarmAction: IAlarmAction;
  /** The stack whose functions each get an alarm: every function built by platformFunction (ENTRY_METADATA). */
  readonly functionsOf: Construct;
  readonly queues: Queues;
  readonly tables: Readonly<Record<string, ITable>>;
  /** Each HTTP API by its name: the three of HTTP_APIS and the console's. */
  readonly httpApis: Readonly<Record<string, HttpApi>>;
  readonly socket: { readonly apiId: string; readonly stage: string };
}

/**
 * The alarms on what the whole stack shares (every queue, the tables, the WebSocket API), an alarm
 * on each function in that function's own scope (so in its API's nested stack), and the dashboard.
 * Each HTTP API's 5xx alarm is made with the API (lib/http-apis.ts), the failing-webhooks alarm with
 * the delivery function (lib/webhook-delivery.ts). Built last, when every function exists.
 */
export class Operations extends Construct {
  readonly dashboard: PlatformDashboard;

  constructor(scope: Construct, id: string, props: OperationsProps) {
    super(scope, id);
    const action = props.alarmAction;
    const queues = new Construct(this, 'Queues');
    for (const [name, queue] of Object.entries(props.queues.byName)) queueAlarms(queues, name as QueueName, queue, action);
    for (const [name, table] of Object.entries(props.tables)) tableAlarm(new Construct(this, `${name[0].toUpperCase()}${name.slice(1)}Table`), name, table, action);
    socketApiAlarm(new Construct(this, 'EventsSocket'), props.socket.apiId, props.socket.stage, action);
    for (const c of props.functionsOf.node.findAll()) {
      // Lambda@Edge functions (plain Functions, lib/data-edge.ts) report their metrics in each region they run in: no alarm here.
      if (c instanceof NodejsFunction && c.node.metadata.some((m) => m.type === ENTRY_METADATA)) functionAlarm(c, action);
    }
    this.dashboard = new PlatformDashboard(this, 'Dashboard', { httpApis: props.httpApis, socket: props.socket, queues: props.queues });
  }
}
