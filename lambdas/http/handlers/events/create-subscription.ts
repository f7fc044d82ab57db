import { workspaceHandler } from '../../handler.js';
import { Subscriptions } from '../../../events/subscriptions.js';

/** POST .../subscriptions: 201 Subscription, with `signing_secret` (shown once) for a webhook. */
export const handler = workspaceHandler('events.subscriptions.create', async (req, { engine, workspace }) => ({
  status: 201,
  body: await new Subscriptions(engine).create(workspace.id, req.json),
}));
