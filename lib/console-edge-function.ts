/**
 * The viewer-request function of the console distribution's default behavior (lib/console.ts), as
 * CloudFront Functions JavaScript runtime 2.0 source. Kept as text built here so that a test can run
 * the very code CloudFront runs (test/infra/console.test.ts).
 */

/** Where the console API's routes live on the console's origin: that behavior goes to API Gateway, untouched. */
export const CONSOLE_API_PATH_PATTERN = '/console/api/*';

/**
 * The console's pages are routes of the front-end (`/keys`, `/invite`, ...), not files: a path whose
 * last segment has no dot is answered with `/index.html`, and the app draws the page. Files (`/assets/…js`,
 * `/openapi/ai.json`) keep their path, so a missing one stays S3's own 403 instead of a page. This
 * replaces distribution-wide custom error responses, which would also turn the console API's 403 and
 * 404 answers into index.html: the function runs on the files' behavior only.
 */
export function spaFallbackHandlerSource(): string {
  return `function handler(event) {
  var request = event.request;
  var uri = request.uri;
  if (uri.lastIndexOf('.') <= uri.lastIndexOf('/')) request.uri = '/index.html';
  return request;
}`;
}

export const spaFallbackFunctionCode = () => `${spaFallbackHandlerSource()}\n`;
