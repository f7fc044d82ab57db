/** The platform's three APIs (spec section 1). */
export const APIS = ['ai', 'data', 'events'] as const;
export type Api = (typeof APIS)[number];

/** Which API call an event comes from, as plain fields (the activity log's `source`, `method`, `route`). */
export interface CallInfo {
  api: Api;
  /** The HTTP method. */
  method: string | null;
  /** The route as templated (`/v1/databases/{database}`), or the raw path of an unmatched call. */
  route: string | null;
  /** ISO 3166 alpha-2 country of the caller, when the edge told (CloudFront-Viewer-Country). */
  country?: string | null;
}
