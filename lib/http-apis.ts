import { NestedStack } from 'aws-cdk-lib';
import { HttpApi, HttpMethod, HttpRoute, HttpRouteKey, HttpStage } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { IAlarmAction } from 'aws-cdk-lib/aws-cloudwatch';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import type { Api } from '../lambdas/shared/api.js';
import { ROUTES, countsCalls, type RouteDef } from '../lambdas/http/routes.js';
import { accessLogSettings } from './access-log.js';
import { acknowledgeNoGatewayAuth } from './nag.js';
import { RouteFunction, constructId, type GrantTargets } from './route-function.js';
import { platformStackName } from './stack-name.js';
import { httpApiAlarm } from './alarms.js';

export const HTTP_APIS = ['ai', 'data', 'events'] as const satisfies readonly Api[];

/**
 * Route groups that get a nested stack of their own inside their API's: the AI API's OpenAI
 * compatibility routes (issue 38) would take the AI template past the 500-resource limit at about
 * eight resources a route (docs/decisions/stack-layout.md).
 */
export const ROUTE_GROUP_STACKS: readonly { api: Api; id: string; description: string; routes: (r: RouteDef) => boolean }[] = [
  { api: 'ai', id: 'OpenAi', description: 'the AI API’s OpenAI compatibility route functions and their alarms', routes: (r) => r.operationIds === 'optional' },
];

/** The API's `ANY $default` route: unknown paths still get the platform's answer (401 before routing), not API Gateway's 404. */
export const isFallback = (r: RouteDef) => r.path === '$default';

/**
 * The three HTTP APIs, generated from ROUTES: one function, integration and route per entry, each API
 * in a nested stack of its own. A route costs about eight resources (function, role, policy, log
 * group, permission, integration, route, alarm); one template holds at most 500, so the APIs live
 * apart from each other and from the shared resources of the parent (docs/decisions/stack-layout.md).
 */
export class HttpApis extends Construct {
  readonly urls = {} as Record<Api, string>;
  /** Each API's id (the Events distribution reaches it by its execute-api host). */
  readonly apiIds = {} as Record<Api, string>;
  /** Each API's nested stack (its own template and resource count). */
  readonly stacks = {} as Record<Api, NestedStack>;
  /** The nested stacks of ROUTE_GROUP_STACKS, inside their API's, by group id. */
  readonly groupStacks: Record<string, NestedStack> = {};
  readonly apis = {} as Record<Api, HttpApi>;

  constructor(scope: Construct, id: string, props: { targets: GrantTargets; alarmAction: IAlarmAction }) {
    super(scope, id);
    for (const api of HTTP_APIS) {
      const routes = ROUTES.filter((r) => r.api === api);
      // Without a $default route API Gateway answers unknown paths with its own 404 instead of our 401.
      if (!routes.some(isFallback)) throw new Error(`the ${api} API has no 'ANY $default' route in ROUTES`);

      // One nested stack per API: its acknowledgement below covers exactly that API's routes.
      const scope = new NestedStack(this, constructId(api), { description: `${platformStackName(this)}: the ${api} HTTP API, its route functions and their alarms` });
      this.stacks[api] = scope;
      const httpApi = new HttpApi(scope, 'Api', { apiName: `${platformStackName(this)}-${api}`, createDefaultStage: false });
      const stage = new HttpStage(scope, 'Stage', { httpApi, stageName: '$default', autoDeploy: true, accessLogSettings: accessLogSettings(scope, 'http') });
      this.urls[api] = stage.url;
      this.apiIds[api] = httpApi.apiId;
      this.apis[api] = httpApi;
      httpApiAlarm(scope, api, httpApi, props.alarmAction);

      const groups = ROUTE_GROUP_STACKS.filter((g) => g.api === api);
      const grouped = (r: RouteDef) => groups.some((g) => g.routes(r));
      addRoutes(scope, httpApi, api, routes.filter((r) => !grouped(r)), props.targets);
      acknowledgeNoGatewayAuth(scope);
      for (const group of groups) {
        const mine = routes.filter(group.routes);
        if (mine.length === 0) continue;
        const groupStack = new NestedStack(scope, group.id, { description: `${platformStackName(this)}: ${group.description}` });
        this.groupStacks[group.id] = groupStack;
        addRoutes(groupStack, httpApi, api, mine, props.targets);
        acknowledgeNoGatewayAuth(groupStack);
      }
    }
  }
}

/**
 * Each of `routes` (all of one API) as its own function, with the IAM and environment of its grants
 * (RouteFunction), its integration and its API Gateway route on `httpApi`, all in `scope`: the three
 * HTTP APIs here and the console API (lib/console.ts) are generated the one way. `environment`: settings
 * every function of that API gets beside its grants'.
 */
export function addRoutes(scope: Construct, httpApi: HttpApi, api: string, routes: readonly RouteDef[], targets: GrantTargets, environment?: Readonly<Record<string, string>>): Record<string, NodejsFunction> {
  const fns: Record<string, NodejsFunction> = {};
  for (const route of routes) {
    if (isFallback(route) && route.method !== 'ANY') throw new Error(`route ${route.id}: $default takes method ANY`);
    const name = constructId(route.id);
    const { fn } = new RouteFunction(scope, name, { route, description: `${api} API: ${route.method} ${route.path}`, targets, countsCalls: countsCalls(route), environment });
    new HttpRoute(scope, `${name}Route`, {
      httpApi,
      routeKey: isFallback(route) ? HttpRouteKey.DEFAULT : HttpRouteKey.with(route.path, HttpMethod[route.method]),
      integration: new HttpLambdaIntegration(`${name}Integration`, fn),
    });
    fns[route.id] = fn;
  }
  return fns;
}
