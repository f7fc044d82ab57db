import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import { WebSocketApi, WebSocketStage } from 'aws-cdk-lib/aws-apigatewayv2';
import { WebSocketLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { CfnAccount } from 'aws-cdk-lib/aws-apigateway';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { ManagedPolicy, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { SOCKET_ROUTES } from '../lambdas/http/routes.js';
import { CONNECTION_TABLE_SCHEMA } from '../lambdas/engine/aws/table.js';
import { accessLogSettings } from './access-log.js';
import { acknowledgeAccountLoggingRole, acknowledgeEphemeralTable, acknowledgeNoGatewayAuth } from './nag.js';
import { RouteFunction, constructId, type ConnectionsTarget, type GrantTargets } from './route-function.js';

/** The stage, and so the path every handshake reaches API Gateway at (lib/events-edge.ts). */
export const SOCKET_STAGE = 'v1';
const REQUIRED_KEYS = ['$connect', '$default', '$disconnect'];

export interface SocketApiProps {
  readonly targets: Omit<GrantTargets, 'connections'>;
  /**
   * WebSocket stages can log only once the account-wide API Gateway CloudWatch role is set (else the
   * deployment fails with "CloudWatch Logs role ARN must be set in account settings"). Turn this off
   * where the account already manages that setting elsewhere.
   * @default true
   */
  readonly manageAccountLoggingRole?: boolean;
}

/** The Events WebSocket API, generated from SOCKET_ROUTES, with stage `v1`. */
export class SocketApi extends Construct {
  readonly url: string;
  readonly connections: ConnectionsTarget;
  /** The API's id: CloudFront reaches the stage at `<id>.execute-api.<region>.<suffix>` (lib/events-edge.ts). */
  readonly apiId: string;

  constructor(scope: Construct, id: string, props: SocketApiProps) {
    super(scope, id);
    const keys = SOCKET_ROUTES.flatMap((r) => r.routeKeys);
    for (const key of REQUIRED_KEYS) {
      if (keys.filter((k) => k === key).length !== 1) throw new Error(`SOCKET_ROUTES must route ${key} exactly once`);
    }

    const api = new WebSocketApi(this, 'Api', { apiName: `${Stack.of(this).stackName}-events-socket` });
    const stage = new WebSocketStage(this, 'Stage', { webSocketApi: api, stageName: SOCKET_STAGE, autoDeploy: true, accessLogSettings: accessLogSettings(this, 'websocket') });
    if (props.manageAccountLoggingRole ?? true) stage.node.addDependency(this.accountLoggingRole());
    this.url = stage.url;
    this.apiId = api.apiId;
    // The connection gateway posts frames (POST) and closes connections (DELETE), on this stage only;
    // GET (connection info) is not used. The connection id is only known at run time.
    const manage = (method: string) =>
      Stack.of(this).formatArn({ service: 'execute-api', resource: api.apiId, resourceName: `${SOCKET_STAGE}/${method}/@connections/*` });
    this.connections = { endpoint: stage.callbackUrl, manageArns: [manage('POST'), manage('DELETE')], postArn: manage('POST'), table: this.connectionTable() };

    for (const route of SOCKET_ROUTES) {
      const name = constructId(route.id);
      const targets = { ...props.targets, connections: this.connections };
      const { fn } = new RouteFunction(this, name, { route, description: `events WebSocket: ${route.routeKeys.join(' ')}`, targets });
      for (const key of route.routeKeys) {
        api.addRoute(key, { integration: new WebSocketLambdaIntegration(`${name}${constructId(key.replace('$', ''))}`, fn) });
      }
    }
    acknowledgeNoGatewayAuth(this);
  }

  /**
   * What each open connection serves, keyed by API Gateway's connection id. Records live at most as
   * long as API Gateway keeps a connection (2 hours, then TTL); $disconnect deletes them earlier.
   */
  private connectionTable(): Table {
    const table = new Table(this, 'Connections', {
      partitionKey: { name: CONNECTION_TABLE_SCHEMA.partitionKey, type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: CONNECTION_TABLE_SCHEMA.ttlAttribute,
      encryption: TableEncryption.AWS_MANAGED,
      // Nothing to keep: a record is worthless once its connection is gone.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    acknowledgeEphemeralTable(table);
    return table;
  }

  /** Sets the region's API Gateway CloudWatch role; retained on delete so other APIs keep logging. */
  private accountLoggingRole(): CfnAccount {
    const role = new Role(this, 'AccountLoggingRole', {
      assumedBy: new ServicePrincipal('apigateway.amazonaws.com'),
      managedPolicies: [ManagedPolicy.fromAwsManagedPolicyName('service-role/AmazonAPIGatewayPushToCloudWatchLogs')],
    });
    role.applyRemovalPolicy(RemovalPolicy.RETAIN);
    acknowledgeAccountLoggingRole(role);
    const account = new CfnAccount(this, 'AccountLogging', { cloudWatchRoleArn: role.roleArn });
    account.applyRemovalPolicy(RemovalPolicy.RETAIN);
    return account;
  }
}
