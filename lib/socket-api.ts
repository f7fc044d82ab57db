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
import { acknowledgeAccountLoggingRole, acknowledgeEphemeralTable, acknowledgeNoGatewayAuth, acknowledgeSocketStageWithoutAccessLogs } from './nag.js';
import { RouteFunction, constructId, type ConnectionsTarget, type GrantTargets } from './route-function.js';

/** The stage, and so the path every handshake reaches API Gateway at (lib/events-edge.ts). */
export const SOCKET_STAGE = 'v1';
const REQUIRED_KEYS = ['$connect', '$default', '$disconnect'];

/**
 * The CDK context value that says whether the WebSocket stage may write access logs, which API Gateway
 * (REST and WebSocket APIs, not HTTP APIs) does only through the region's account-wide CloudWatch
 * role (docs/deploying.md, section 4):
 * - unset or `none` (the default): the stack leaves that setting alone and the WebSocket stage writes
 *   no access logs (a stage asking for them in an account without the role fails the deploy);
 * - `existing`: the account already has the role set (by another stack or by hand): access logs on;
 * - `create`: the stack creates the role and sets it (`AWS::ApiGateway::Account`), replacing any role
 *   the account had in this region, and the access logs are on.
 */
export const API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT = 'apiGatewayCloudWatchRole';
export const API_GATEWAY_CLOUDWATCH_ROLE_VALUES = ['none', 'existing', 'create'] as const;
export type ApiGatewayCloudWatchRole = (typeof API_GATEWAY_CLOUDWATCH_ROLE_VALUES)[number];

/** The context's choice; anything else stops synthesis, naming the values it takes. */
export function apiGatewayCloudWatchRole(scope: Construct): ApiGatewayCloudWatchRole {
  const raw: unknown = scope.node.tryGetContext(API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT);
  if (raw === undefined || raw === null || raw === '') return 'none';
  if (!(API_GATEWAY_CLOUDWATCH_ROLE_VALUES as readonly unknown[]).includes(raw)) {
    throw new Error(`context ${API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT}=${JSON.stringify(raw)}: must be one of ${API_GATEWAY_CLOUDWATCH_ROLE_VALUES.join(', ')} (docs/deploying.md, section 4)`);
  }
  return raw as ApiGatewayCloudWatchRole;
}

export interface SocketApiProps {
  readonly targets: Omit<GrantTargets, 'connections'>;
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
    const cloudWatchRole = apiGatewayCloudWatchRole(this);
    const logs = cloudWatchRole !== 'none';
    const stage = new WebSocketStage(this, 'Stage', { webSocketApi: api, stageName: SOCKET_STAGE, autoDeploy: true, ...(logs ? { accessLogSettings: accessLogSettings(this, 'websocket') } : {}) });
    if (cloudWatchRole === 'create') stage.node.addDependency(this.accountLoggingRole());
    if (!logs) acknowledgeSocketStageWithoutAccessLogs(stage);
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

  /**
   * Sets the region's API Gateway CloudWatch role (opt-in: it replaces the account's own); retained on
   * delete so other APIs keep logging. It waits for its role explicitly: API Gateway checks the role
   * when the setting is made, and refuses one it cannot assume yet.
   */
  private accountLoggingRole(): CfnAccount {
    const role = new Role(this, 'AccountLoggingRole', {
      assumedBy: new ServicePrincipal('apigateway.amazonaws.com'),
      managedPolicies: [ManagedPolicy.fromAwsManagedPolicyName('service-role/AmazonAPIGatewayPushToCloudWatchLogs')],
    });
    role.applyRemovalPolicy(RemovalPolicy.RETAIN);
    acknowledgeAccountLoggingRole(role);
    const account = new CfnAccount(this, 'AccountLogging', { cloudWatchRoleArn: role.roleArn });
    account.applyRemovalPolicy(RemovalPolicy.RETAIN);
    account.node.addDependency(role);
    return account;
  }
}
