import { tokenEndpoint } from '../../oauth-token.js';

export const handler = tokenEndpoint('ai.oauth.token');
