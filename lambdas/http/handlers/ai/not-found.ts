import { notFoundHandler } from '../../not-found.js';

export const handler = notFoundHandler('ai.fallback');
