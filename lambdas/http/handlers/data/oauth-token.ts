import { tokenEndpoint } from '../../oauth-token.js';

export const handler = tokenEndpoint('data.oauth.token');
