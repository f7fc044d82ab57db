/** The platform's three public APIs (spec section 1): the ones with OpenAPI documents, API stacks and credentials of spec 5. */
export const APIS = ['ai', 'data', 'events'] as const;
export type Api = (typeof APIS)[number];

/**
 * Every API of the route table: the public three and the console's own (`/console/api/…`, issue 37),
 * which only the console's pages call, with a person's session. Code that goes over the public APIs
 * (OpenAPI documents, their stacks) iterates APIS; the route table, its chain and the local server
 * iterate these.
 */
export const ROUTE_APIS = [...APIS, 'console'] as const;
export type RouteApi = (typeof ROUTE_APIS)[number];

/** Which API call an event comes from, as plain fields (the activity log's `source`, `method`, `route`). */
export interface CallInfo {
  api: RouteApi;
  /** The HTTP method. */
  method: string | null;
  /** The route as templated (`/v1/databases/{database}`), or the raw path of an unmatched call. */
  route: string | null;
  /** ISO 3166 alpha-2 country of the caller, when the edge told (CloudFront-Viewer-Country). */
  country?: string | null;
}
