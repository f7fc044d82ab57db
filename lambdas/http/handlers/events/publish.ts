import { workspaceHandler } from '../../handler.js';
import { publish } from '../../../events/publish.js';

/** POST .../workspaces/{workspace_id}/events (spec 4.21 "Publish"): 202 {accepted, rejected}. */
export const handler = workspaceHandler('events.events.publish', async (req, { engine, principal, workspace }) => ({
  status: 202,
  body: await publish(engine, principal, workspace.id, req.json),
}));
