import { tokenEndpoint } from '../../auth/token-endpoint.js';

export const handler = tokenEndpoint('data.oauth.token');
