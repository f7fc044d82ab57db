import { preflightHandler } from '../../http/preflight.js';

export const handler = preflightHandler('data.preflight');
