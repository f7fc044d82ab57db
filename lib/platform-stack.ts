import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { HTTP_APIS, HttpApis } from './http-apis.js';
import { Queues } from './queues.js';
import { SigningKey } from './signing.js';
import { ServerSecret } from './server-secret.js';
import { SOCKET_STAGE, SocketApi } from './socket-api.js';
import { Storage } from './storage.js';
import { VectorBucket } from './vector-bucket.js';
import { WebhookDelivery } from './webhook-delivery.js';
import { JobsConsumer } from './jobs-consumer.js';
import { StreamDelivery } from './stream-delivery.js';
import { EventsEdge } from './events-edge.js';
import { AiEdge } from './ai-edge.js';
import { BlobArrivals } from './blob-arrivals.js';
import { UploadsSweep } from './uploads-sweep.js';
import { UploadChecks } from './upload-checks.js';
import { CollectionsSweep } from './collections-sweep.js';
import { KnowledgeItems } from './knowledge-items.js';
import { KnowledgeJobs } from './knowledge-jobs.js';
import { FfmpegLayer } from './ffmpeg-layer.js';
import { DataEdge } from './data-edge.js';
import { AlarmTopic } from './alarm-topic.js';
import { Operations } from './operations.js';
import { capConsumerConcurrency } from './consumer-concurrency.js';
import { PlatformConsole } from './console.js';

/** The WebSocket stage's access logs and the account's API Gateway CloudWatch role: the context value API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT (lib/socket-api.ts). */
export type PlatformStackProps = StackProps;

/** The whole platform: storage, the vector bucket, queues, the token signing key, the server secret, the alarm topic, the three HTTP APIs (each a nested stack), the Events WebSocket API, webhook delivery (queue consumer, outbox sweep, alarms), the jobs queue's consumer, the AI uploads sweep and checks, the knowledge queue's consumer, the knowledge jobs' consumer with the ffmpeg layer, the collections sweep, stream delivery, the Events distribution, the AI distribution (chat streamed), the console (its files and API behind one distribution), and operations: alarms and the dashboard. */
export class PlatformStack extends Stack {
  readonly storage: Storage;
  readonly vectors: VectorBucket;
  readonly queues: Queues;
  readonly signing: SigningKey;
  readonly secret: ServerSecret;
  readonly socket: SocketApi;
  readonly http: HttpApis;
  readonly webhookDelivery: WebhookDelivery;
  readonly jobs: JobsConsumer;
  readonly streamDelivery: StreamDelivery;
  readonly eventsEdge: EventsEdge;
  readonly aiEdge: AiEdge;
  readonly blobArrivals: BlobArrivals;
  readonly uploadsSweep: UploadsSweep;
  readonly uploadChecks: UploadChecks;
  readonly collectionsSweep: CollectionsSweep;
  readonly knowledgeItems: KnowledgeItems;
  readonly knowledgeJobs: KnowledgeJobs;
  readonly ffmpeg: FfmpegLayer;
  readonly dataEdge: DataEdge;
  readonly console: PlatformConsole;
  readonly alarms: AlarmTopic;
  readonly operations: Operations;

  constructor(scope: Construct, id: string, props: PlatformStackProps = {}) {
    super(scope, id, props);
    // A small account's Lambda quota: `-c consumerMaxConcurrency=N` caps every queue consumer (docs/deploying.md, section 1).
    capConsumerConcurrency(this);
    this.storage = new Storage(this, 'Storage');
    // The vector databases' indexes (Amazon S3 Vectors; docs/decisions/vector-index-aws.md).
    this.vectors = new VectorBucket(this, 'Vectors');
    this.queues = new Queues(this, 'Queues');
    this.signing = new SigningKey(this, 'Signing');
    this.secret = new ServerSecret(this, 'ServerSecret');
    // Every alarm of the stack notifies this topic (docs/decisions/operations.md).
    this.alarms = new AlarmTopic(this, 'Alarms');
    const alarmAction = this.alarms.action;
    // ffmpeg and ffprobe for arm64 Lambda: recordings' items, knowledge jobs and their start route (docs/decisions/ffmpeg-layer.md).
    this.ffmpeg = new FfmpegLayer(this, 'Ffmpeg');
    const targets = { table: this.storage.table, bucket: this.storage.bucket, queues: this.queues, signing: this.signing, secret: this.secret, vectors: this.vectors, ffmpeg: this.ffmpeg };
    // The WebSocket API comes first: HTTP functions with connections:post need its endpoint.
    this.socket = new SocketApi(this, 'EventsSocket', { targets });
    const httpTargets = { ...targets, connections: this.socket.connections };
    this.http = new HttpApis(this, 'Http', { targets: httpTargets, alarmAction });
    this.webhookDelivery = new WebhookDelivery(this, 'WebhookDelivery', { table: this.storage.table, queues: this.queues, secret: this.secret, alarmAction });
    // Background jobs: the jobs queue's consumer (vector database removal).
    this.jobs = new JobsConsumer(this, 'Jobs', { table: this.storage.table, queues: this.queues, vectors: this.vectors });
    // Files sent straight to the bucket (docs/data/blobs.md, "Large files on AWS").
    this.blobArrivals = new BlobArrivals(this, 'BlobArrivals', { table: this.storage.table, bucket: this.storage.bucket, queues: this.queues });
    // What expired AI uploads leave (docs/decisions/ai-uploads.md, "Expiry"), swept on a schedule.
    this.uploadsSweep = new UploadsSweep(this, 'UploadsSweep', { table: this.storage.table, bucket: this.storage.bucket });
    // AI uploads' SHA-256 checks that outlast their complete call (docs/decisions/upload-checks.md).
    this.uploadChecks = new UploadChecks(this, 'UploadChecks', { table: this.storage.table, bucket: this.storage.bucket, queues: this.queues });
    // Collection items become packages of cited chunks: the knowledge queue's consumer (docs/decisions/knowledge-items-aws.md).
    const knowledge = { table: this.storage.table, bucket: this.storage.bucket, queues: this.queues, vectors: this.vectors, ffmpeg: this.ffmpeg };
    this.knowledgeItems = new KnowledgeItems(this, 'KnowledgeItems', knowledge);
    // A recording becomes a cited knowledge base, a step a message: the knowledge-jobs queue's consumer (docs/decisions/knowledge-jobs-aws.md).
    this.knowledgeJobs = new KnowledgeJobs(this, 'KnowledgeJobs', knowledge);
    // Expired knowledge collections' data (docs/decisions/knowledge-collections.md) and lost items, swept on a schedule.
    this.collectionsSweep = new CollectionsSweep(this, 'CollectionsSweep', knowledge);
    this.streamDelivery = new StreamDelivery(this, 'StreamDelivery', { table: this.storage.table, queues: this.queues, connections: this.socket.connections, secret: this.secret, signing: this.signing });
    // The Events API's URL: HTTP routes and the stream under one base (docs/decisions/stream-url-aws.md).
    this.eventsEdge = new EventsEdge(this, 'EventsEdge', { httpApiId: this.http.apiIds.events, socketApiId: this.socket.apiId, socketStage: SOCKET_STAGE });
    // The AI API's URL: HTTP routes and the streamed chat under one base (docs/decisions/ai-streaming-aws.md).
    this.aiEdge = new AiEdge(this, 'AiEdge', { httpApiId: this.http.apiIds.ai, targets: httpTargets });
    // The Data API's URL: files of every size, through the upload relay (docs/decisions/large-files-aws.md).
    this.dataEdge = new DataEdge(this, 'DataEdge', { httpApiId: this.http.apiIds.data });
    // The console: its files and its API (the route table's console rows) behind one distribution (docs/decisions/console-aws.md).
    this.console = new PlatformConsole(this, 'Console', { targets: httpTargets, alarmAction, accessLogs: this.storage.accessLogs });

    // Last: every function exists now, and each gets its alarm.
    this.operations = new Operations(this, 'Operations', {
      alarmAction,
      functionsOf: this,
      queues: this.queues,
      tables: { platform: this.storage.table, connections: this.socket.connections.table },
      httpApis: { ...this.http.apis, console: this.console.api },
      socket: { apiId: this.socket.apiId, stage: SOCKET_STAGE },
    });

    // Which URL serves what (docs/deploying.md lists them for operators): clients use ai_url, data_url, events_url.
    const apiUrlDescriptions: Record<(typeof HTTP_APIS)[number], string> = {
      ai: "The AI HTTP API's own stage URL, without CloudFront: a streamed chat arrives whole, at the end; clients use AiUrl",
      data: "The Data HTTP API's own stage URL, without CloudFront: bodies over about 4.45 MiB only with Upload-Length; clients use DataUrl",
      events: "The Events HTTP API's own stage URL, without CloudFront and the stream (426); clients use EventsUrl",
    };
    for (const api of HTTP_APIS) new CfnOutput(this, `${api[0].toUpperCase()}${api.slice(1)}ApiUrl`, { value: this.http.urls[api], description: apiUrlDescriptions[api] });
    new CfnOutput(this, 'EventsSocketUrl', { value: this.socket.url, description: "The Events WebSocket API's stage (wss): a stream client that cannot use EventsUrl sends the stream's path in x-stream-path" });
    new CfnOutput(this, 'EventsUrl', { value: this.eventsEdge.url, description: 'events_url: the Events API, its stream included' });
    new CfnOutput(this, 'DataUrl', { value: this.dataEdge.url, description: 'data_url: the Data API, files of every size (large PUTs relayed to S3)' });
    new CfnOutput(this, 'AiUrl', { value: this.aiEdge.url, description: 'ai_url: the AI API, chat completions streamed' });
    new CfnOutput(this, 'ConsoleUrl', { value: this.console.url, description: "The console: people of an organization sign in here by invitation; CONSOLE_URL of the admin CLI's `org invite` (the invitation links' base)" });
    new CfnOutput(this, 'TableName', { value: this.storage.table.tableName, description: 'TABLE_NAME of the admin CLI (ENGINE=aws npm run admin): the platform table' });
    new CfnOutput(this, 'VectorBucketName', { value: this.vectors.bucketName, description: 'VECTOR_BUCKET_NAME of the admin CLI for vector-db create and delete: the S3 Vectors bucket of the vector databases' });
  }
}
