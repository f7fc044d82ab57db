import { preflightHandler } from '../../preflight.js';

export const handler = preflightHandler('events.preflight');
