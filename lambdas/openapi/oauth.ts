/** `POST /v1/oauth/token`, the same route on all three APIs: the client credentials grant (RFC 6749 4.4). */
import { tokenAnswerSchema, tokenErrorSchema, tokenRequestSchema } from '../http/oauth-token.js';
import type { OperationDoc } from './operation.js';

export const OAUTH_TOKEN_DOC: OperationDoc = {
  tag: 'OAuth',
  summary: 'Exchange client credentials for an access token',
  description:
    "The client credentials grant of RFC 6749 section 4.4. The client's id and secret come in HTTP Basic or in the body, never both. Errors use RFC 6749's shape (`error`, `error_description`), which OAuth client libraries read. The token is sent as `Authorization: Bearer <token>` until it expires (`401 invalid_credentials`): then obtain a new one.",
  body: {
    name: 'TokenRequest',
    schema: tokenRequestSchema,
    contentType: 'application/x-www-form-urlencoded',
    example: { grant_type: 'client_credentials', client_id: 'cli_0123456789abcdef', client_secret: 'cls_secret' },
    description: "The grant, form-encoded or JSON. The client's id and secret go here or in HTTP Basic (`Authorization: Basic`, each form-urlencoded before Base64), never both.",
    alternatives: [{ name: 'TokenRequest', schema: tokenRequestSchema, contentType: 'application/json' }],
  },
  responses: {
    200: { description: 'A token.', name: 'TokenAnswer', schema: tokenAnswerSchema, headers: { 'Cache-Control': { description: '`no-store`.', required: true } }, example: { access_token: 'eyJ…', token_type: 'Bearer', expires_in: 3600 } },
    400: { description: 'A malformed request, or a grant other than client_credentials.', name: 'TokenError', schema: tokenErrorSchema },
    401: { description: 'The client does not authenticate.', name: 'TokenError', schema: tokenErrorSchema, headers: { 'WWW-Authenticate': { description: 'Basic or Bearer realm.', required: true } } },
  },
  errors: [],
};
