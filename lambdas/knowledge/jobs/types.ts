/**
 * What the steps of a knowledge job (spec 4.8; docs/ai/knowledge-jobs.md) hand each other: the
 * transcript as timed segments on the recording's clock, and the entries drawn from it.
 */

/** A transcript segment; times in seconds from the recording's start, null where the transcript gave none. */
export interface TimedSegment {
  start_s: number | null;
  end_s: number | null;
  text: string;
}

export const ENTRY_KINDS = ['decision', 'action_item', 'question', 'fact'] as const;
export type EntryKind = (typeof ENTRY_KINDS)[number];

/** One entry of the knowledge base: a statement in the output language resting on a verbatim quote. */
export interface Entry {
  kind: EntryKind;
  /** In the job's `output_language`. */
  statement: string;
  /** Verbatim from the transcript, never translated. */
  quote: string;
  start_s: number | null;
  end_s: number | null;
  /** Action items: who, and when, where the recording says. */
  owner: string | null;
  due: string | null;
}

export interface JobChatBody {
  messages: { role: 'system' | 'user'; content: string | unknown[] }[];
  response_format?: unknown;
  max_tokens: number;
}

/** One chat call of a job through the organization's default chat route, under the job's spend control: the assistant message's text. */
export type JobChat = (body: JobChatBody) => Promise<string>;

/** Runs `work` once per key across crashes and retries: a stored result comes back without running it again. */
export type StepMemo = <T>(key: string, work: () => Promise<T>) => Promise<T>;
