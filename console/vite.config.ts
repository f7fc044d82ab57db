/**
 * The console's front-end build (Preact + Vite 8): `npm run build:console` (scripts/build-console.mjs)
 * writes console/dist/, which `npm start` serves on CONSOLE_PORT and the AWS stack uploads to S3.
 * Preact's JSX goes through Vite's own transform (Oxc, `importSource: 'preact'`): no Babel preset,
 * nothing to hot-reload in a build (docs/decisions/console-front-end.md).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';

const ROOT = dirname(fileURLToPath(import.meta.url));
export const OPENAPI_DIR = join(ROOT, '..', 'docs', 'openapi');
export const OPENAPI_APIS = ['ai', 'data', 'events'] as const;

/**
 * The committed OpenAPI documents beside the built files (`dist/openapi/{api}.json`) for the API
 * reference page: from the console's own origin its policy (`connect-src 'self'`) lets the page read
 * them, locally and behind CloudFront alike. Fetched only when that page opens, never on first load.
 */
function openapiDocuments(): Plugin {
  return {
    name: 'console-openapi-documents',
    apply: 'build',
    generateBundle() {
      for (const api of OPENAPI_APIS) {
        this.emitFile({ type: 'asset', fileName: `openapi/${api}.json`, source: readFileSync(join(OPENAPI_DIR, `${api}.json`)) });
      }
    },
  };
}

export default defineConfig({
  root: ROOT,
  base: '/',
  // The project's root has its own package.json scripts; keep Vite from reading a .env there.
  envDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  plugins: [openapiDocuments()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // No inline data: URLs: the console's policy is `default-src 'self'`.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
