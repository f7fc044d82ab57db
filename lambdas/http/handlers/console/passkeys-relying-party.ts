/**
 * The console's WebAuthn relying party (docs/decisions/console-passkeys.md), from its own address
 * (console-origin.ts), never from a request's Host: the RP ID is the console's host name and a ceremony
 * must come from the console's origin. Browsers refuse an IP address as an RP ID, so a console served on
 * a loopback address over plain http (the local server) is the relying party `localhost`, its pages
 * opened at `http://localhost:<port>` (the same server; the CSRF step accepts that name too).
 */
import type { RelyingParty } from '../../../console/passkeys.js';
import { consoleUrl } from '../../console-origin.js';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
export const RP_NAME = 'Platform console';

export function relyingParty(): RelyingParty {
  const url = new URL(consoleUrl());
  if (url.protocol === 'http:' && LOOPBACK.has(url.hostname)) {
    return { id: 'localhost', name: RP_NAME, origins: [`http://localhost${url.port ? `:${url.port}` : ''}`] };
  }
  return { id: url.hostname, name: RP_NAME, origins: [url.origin] };
}
