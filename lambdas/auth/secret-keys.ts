import { hash } from 'node:crypto';
import { randomHex } from '../shared/ids.js';

/** `aik_` + 64 lowercase hex (spec section 5). */
export const SECRET_KEY_PATTERN = /^aik_[0-9a-f]{64}$/;

export const newSecretKey = () => `aik_${randomHex(32)}`;

/**
 * Keys carry 256 random bits, so a plain SHA-256 is a safe one-way store (a slow password hash buys
 * nothing against that entropy and would cost every uncached request). The one-shot `hash` builds no
 * Hash object: this runs on every request, to look the credential cache up.
 */
export const hashSecret = (secret: string) => hash('sha256', secret, 'hex');
