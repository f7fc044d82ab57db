import { AssetHashType, DockerImage } from 'aws-cdk-lib';
import { Architecture, Code, LayerVersion, type Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENV } from '../lambdas/shared/settings.js';
import { PROJECT_ROOT } from './function-defaults.js';

/**
 * ffmpeg and ffprobe for arm64 Lambda (docs/decisions/ffmpeg-layer.md): a layer holding the static
 * builds the npm packages `@ffmpeg-installer/linux-arm64` and `@ffprobe-installer/linux-arm64` ship
 * (pinned in lib/ffmpeg-layer/package-lock.json), at `bin/` of the layer, which Lambda mounts at `/opt`.
 */

/** Where the layer's programs are in a function (FFMPEG_PATH; ffprobe is looked up beside it, lambdas/knowledge/extract/audio-track.ts). */
export const FFMPEG_LAYER_PATHS = { ffmpeg: '/opt/bin/ffmpeg', ffprobe: '/opt/bin/ffprobe' } as const;
/** The programs' place inside the layer's archive: Lambda extracts a layer to /opt. */
export const FFMPEG_LAYER_DIR = 'bin';

/** The layer's sources: its package.json and lockfile (scripts/ffmpeg-layer.mjs installs them). */
const SOURCE = join(PROJECT_ROOT, 'lib', 'ffmpeg-layer');
const INSTALL_SCRIPT = join(PROJECT_ROOT, 'scripts', 'ffmpeg-layer.mjs');
/** Changes when what the bundling writes does: part of the asset's hash with the lockfile. */
const LAYOUT = 'bin/ffmpeg,bin/ffprobe 0755 v1';

/**
 * The layer's asset: the lockfile names the exact tarballs (by integrity), so its hash with LAYOUT is
 * the asset's, and an unchanged layer is neither bundled again nor uploaded again. Bundled locally
 * (never in Docker): the installed programs copied to `bin/`, readable and executable by everyone,
 * since Lambda runs the function as a user that does not own the layer's files (the packages ship
 * ffprobe as 0744). Template tests skip bundling (their stacks are not in `aws:cdk:bundling-stacks`):
 * then nothing is installed or copied.
 */
function layerCode(): Code {
  const hash = createHash('sha256').update(readFileSync(join(SOURCE, 'package-lock.json'))).update(LAYOUT).digest('hex');
  return Code.fromAsset(SOURCE, {
    assetHashType: AssetHashType.CUSTOM,
    assetHash: hash,
    bundling: {
      // Never run: local bundling always answers (it bundles or throws).
      image: DockerImage.fromRegistry('public.ecr.aws/docker/library/busybox:stable'),
      local: {
        tryBundle(outputDir) {
          // Prints the installed programs' paths; installs them first when `npm ci`'s postinstall did not.
          const programs = JSON.parse(execFileSync(process.execPath, [INSTALL_SCRIPT], { cwd: PROJECT_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })) as Record<keyof typeof FFMPEG_LAYER_PATHS, string>;
          const bin = join(outputDir, FFMPEG_LAYER_DIR);
          mkdirSync(bin, { recursive: true });
          for (const name of Object.keys(FFMPEG_LAYER_PATHS) as (keyof typeof FFMPEG_LAYER_PATHS)[]) {
            copyFileSync(programs[name], join(bin, name));
            chmodSync(join(bin, name), 0o755);
          }
          return true;
        },
      },
    },
  });
}

/**
 * The layer, one for the stack; `use` gives it to a function with FFMPEG_PATH. Its functions: the
 * knowledge items consumer (recordings cut into audio pieces), the knowledge jobs consumer (pieces,
 * frames) and the job start route (`ffmpeg:run`: the recording probed before it is priced).
 */
export class FfmpegLayer extends Construct {
  readonly layer: LayerVersion;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.layer = new LayerVersion(this, 'Layer', {
      description: 'ffmpeg and ffprobe, static arm64 builds (npm @ffmpeg-installer/linux-arm64, @ffprobe-installer/linux-arm64) at /opt/bin',
      compatibleArchitectures: [Architecture.ARM_64],
      license: 'GPL-3.0',
      code: layerCode(),
    });
  }

  /** Adds the layer to `fn` and points its FFMPEG_PATH at the layer's ffmpeg. */
  use(fn: LambdaFunction): void {
    fn.addLayers(this.layer);
    fn.addEnvironment(ENV.ffmpegPath, FFMPEG_LAYER_PATHS.ffmpeg);
  }
}
