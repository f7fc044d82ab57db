/**
 * The API origins of the platforms a test process started (in process, `npm start` as a child, or the
 * Lambda functions behind a local front): test/setup/openapi-answers.ts checks every fetch to them
 * against the API's OpenAPI document.
 */
import type { Api } from '../../lambdas/shared/api.js';

const KEY = Symbol.for('platform.api-origins');
const registry = ((globalThis as Record<symbol, unknown>)[KEY] ??= new Map<string, Api>()) as Map<string, Api>;

export function registerApiOrigins(urls: Partial<Record<Api, string>>): void {
  for (const [api, url] of Object.entries(urls) as [Api, string][]) registry.set(new URL(url).origin, api);
}

export const apiOfOrigin = (origin: string): Api | undefined => registry.get(origin);
