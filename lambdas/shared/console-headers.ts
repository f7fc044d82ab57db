/**
 * The console's security headers, on its pages and its API alike: nothing but its own scripts and
 * styles, never framed (clickjacking), no Referer sent anywhere, no type sniffing. One list: the
 * console API's chain (middleware/respond.ts), the local file server and the stack's CloudFront
 * response headers policy (lib/console.ts) send the same.
 */
export const CONSOLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

/**
 * The header CloudFront adds to every request it sends to the console API's origin, with a value
 * generated at deployment (setting CONSOLE_ORIGIN_VERIFY): the console API's functions serve no request
 * without it, so a caller going straight to the execute-api URL is refused and the headers CloudFront
 * sets (`cloudfront-viewer-address`) can be trusted (docs/decisions/console-aws.md).
 */
export const CONSOLE_ORIGIN_HEADER = 'x-console-origin-verify';
