/**
 * The images a Bedrock chat takes: base64 `data:` URLs of PNG, JPEG, GIF or WebP (Converse carries
 * the bytes; it fetches no links). Pure and free of the SDK, so a decision run can check its images
 * against a bedrock tier before any call (decision/run.ts) without loading the provider.
 */
import type { ImageFormat } from '@aws-sdk/client-bedrock-runtime';

/** The image formats Converse takes, by the media type of a data: URL. */
export const IMAGE_FORMATS: Record<string, ImageFormat> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/jpg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };
export const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

/** Why a Bedrock route cannot take this image URL, or null when it can. */
export function bedrockImageProblem(url: string): string | null {
  const m = DATA_URL.exec(url);
  if (!m) return 'a Bedrock route takes images as base64 data: URLs (data:image/png;base64,...), not links.';
  if (!IMAGE_FORMATS[m[1].toLowerCase()]) return `image type ${m[1]} is not one of ${Object.keys(IMAGE_FORMATS).join(', ')}.`;
  return null;
}
