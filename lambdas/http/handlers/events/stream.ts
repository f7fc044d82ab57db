import { workspaceHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { Subscriptions } from '../../../events/subscriptions.js';
import { claimStreamSlot, parseStreamQuery, requireStreamProtocol, STREAM_SUBPROTOCOL } from '../../../events/stream.js';

/**
 * GET .../subscriptions/{subscription_id}/stream (docs/events/stream.md). The chain has checked the
 * credential (a publishable key passes, from a listed origin), the permission events:stream.open and
 * the workspace. Without a runtime offering the WebSocket upgrade: 426 upgrade_required. With one:
 * the subprotocol, the subscription (not a webhook one), a free slot; then the runtime upgrades (101).
 */
export const handler = workspaceHandler('events.subscriptions.stream', async (req, { engine, workspace, upgrade }) => {
  if (!upgrade) throw new PlatformError('upgrade_required', `The stream is a WebSocket: send "Upgrade: websocket" with the subprotocol "${STREAM_SUBPROTOCOL}".`);
  requireStreamProtocol(req.headers['sec-websocket-protocol']);
  const { leaseSeconds } = parseStreamQuery(req.query);
  const s = await new Subscriptions(engine).get(workspace.id, req.params.subscription_id);
  if (s.delivery.mode === 'webhook') throw new PlatformError('wrong_delivery_mode', 'A webhook subscription is delivered to its URL; streams work on pull and websocket subscriptions.');
  const slot = await claimStreamSlot(engine, workspace.id, s.subscription_id, upgrade.connectionId);
  // The chain resolved this credential: the stream checks it again while open (lambdas/events/stream-credential.ts).
  const credential = { authorization: req.headers.authorization!, origin: req.headers.origin };
  upgrade.accept({ workspaceId: workspace.id, subscriptionId: s.subscription_id, leaseSeconds, protocol: STREAM_SUBPROTOCOL, slot, credential });
  return { status: 101 };
});
