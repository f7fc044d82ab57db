import type { Capability } from '../http/routes.js';

/** Who is calling, resolved from the credential alone (spec section 1: the tenant comes only from it). */
export interface Principal {
  kind: 'secret_key';
  /** Id of the credential (a key id, never the secret). */
  credentialId: string;
  organizationId: string;
  /** Set for an application-bound credential. */
  applicationId: string | null;
  /** The bound application's workspace. */
  workspaceId: string | null;
  /** The bound application's capabilities; null for an organization-wide credential. */
  capabilities: Capability[] | null;
}
