import { workspaceHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { Subscriptions } from '../../../events/subscriptions.js';
import { isServerCredential } from '../../../auth/principal.js';
import { claimStreamSlot } from '../../../events/stream-slots.js';
import { parseStreamQuery } from '../../../events/stream-input.js';
import { parseSubprotocols, requireStreamProtocol, STREAM_SUBPROTOCOL } from '../../websocket.js';
import { requireInbox } from '../../../events/inbox.js';

/**
 * GET .../subscriptions/{subscription_id}/stream (docs/events/stream.md). The chain has checked the
 * credential (a publishable key passes, from a listed origin), the permission events:stream.open and
 * the workspace. Without a runtime offering the WebSocket upgrade: 426 upgrade_required. With one:
 * the subprotocol, the subscription (not a webhook one), a free slot; then the runtime upgrades (101).
 */
export const handler = workspaceHandler('events.subscriptions.stream', async (req, { engine, principal, workspace, upgrade }) => {
  if (!upgrade) throw new PlatformError('upgrade_required', `The stream is a WebSocket: send "Upgrade: websocket" with the subprotocol "${STREAM_SUBPROTOCOL}".`);
  // The bearer. subprotocol is the browser's way of sending a publishable key; Sec-WebSocket-Protocol is
  // logged by proxies, so a server credential never travels there (docs/events/stream.md "Opening").
  if (isServerCredential(principal) && parseSubprotocols(req.headers['sec-websocket-protocol']).bearer !== undefined) {
    throw new PlatformError('secret_key_in_browser', 'A secret key or OAuth client token goes in the Authorization header, never in a bearer. subprotocol (those are for publishable keys).');
  }
  requireStreamProtocol(req.headers['sec-websocket-protocol']);
  const { leaseSeconds } = parseStreamQuery(req.query);
  const s = await new Subscriptions(engine).get(workspace.id, req.params.subscription_id);
  requireInbox(s, 'streamed');
  const slot = await claimStreamSlot(engine, workspace.id, s.subscription_id, upgrade.connectionId);
  // The chain resolved this credential: the stream checks it again while open (lambdas/events/stream-credential.ts).
  const credential = { authorization: req.headers.authorization!, origin: req.headers.origin };
  upgrade.accept({ workspaceId: workspace.id, subscriptionId: s.subscription_id, leaseSeconds, protocol: STREAM_SUBPROTOCOL, slot, credential });
  return { status: 101 };
});
