import { tokenEndpoint } from '../../auth/token-endpoint.js';

export const handler = tokenEndpoint('events.oauth.token');
