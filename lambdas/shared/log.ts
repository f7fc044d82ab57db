/** Structured one-line JSON logs (CloudWatch in AWS, stderr locally). Silenced with LOG_LEVEL=silent. */
import { settings } from './settings.js';

type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level | 'silent', number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** Logging must work even when the settings are invalid (it reports that very error). */
function threshold(): Level | 'silent' {
  try {
    return settings().logLevel;
  } catch {
    return 'info';
  }
}

function emit(level: Level, message: string, fields?: Record<string, unknown>) {
  if (ORDER[level] < ORDER[threshold()]) return;
  process.stderr.write(JSON.stringify({ level, message, time: new Date().toISOString(), ...fields }) + '\n');
}

export const log = {
  debug: (m: string, f?: Record<string, unknown>) => emit('debug', m, f),
  info: (m: string, f?: Record<string, unknown>) => emit('info', m, f),
  warn: (m: string, f?: Record<string, unknown>) => emit('warn', m, f),
  error: (m: string, f?: Record<string, unknown>) => emit('error', m, f),
};
