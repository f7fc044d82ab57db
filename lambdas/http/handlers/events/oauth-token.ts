import { tokenEndpoint } from '../../oauth-token.js';

export const handler = tokenEndpoint('events.oauth.token');
