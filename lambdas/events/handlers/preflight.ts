import { preflightHandler } from '../../http/preflight.js';

export const handler = preflightHandler('events.preflight');
