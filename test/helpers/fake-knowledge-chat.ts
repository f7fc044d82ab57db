/**
 * A fake OpenAI-compatible chat upstream for knowledge jobs (real HTTP on loopback): it answers the
 * job's calls by what they ask, as a model would, from the transcript it is sent:
 *   - extraction (`response_format.json_schema.name` `knowledge_entries`): an entry per stamped line
 *     (`[HH:MM:SS-HH:MM:SS] text`), kinds in turn (decision, action item, question, fact), the quote the
 *     line's text verbatim, the statement "Said: <text>"; a line of the transcript without a stamp (a
 *     plain-text transcript) gives an entry without times; plus `invent` entries whose quotes are in no
 *     line (the evidence check must drop them);
 *   - the support check (`evidence_verdicts`): supported, except statements containing `UNSUPPORTED`
 *     (every statement with `unsupported`, those of lines matching `unsupportedMatch`);
 *   - anything else (the summary): a fixed text.
 * Every call is counted by kind; `delayMs` holds each answer (the benchmark's 2 s a call); `failNext`
 * answers 500 that many times; `usage` replaces the usage reported (an upstream that bills more than
 * asked). `obey` makes it a model that follows an instruction injected into what it reads: when the
 * extraction prompt holds `SYSTEM:`, it adds the entries of OBEYED (a claim quoted with words nobody
 * said, the same claim with an empty, a blank and no quote) and one entry per line of the notes,
 * quoting that line (notes are never evidence).
 */
import http from 'node:http';
import { closeServer, listen } from './servers.js';

export interface FakeKnowledgeChat {
  baseUrl: string;
  calls: { extract: number; reconcile: number; other: number };
  requests: Record<string, any>[];
  behavior: {
    delayMs: number;
    invent: number;
    failNext: number;
    unsupported: boolean;
    /** Lines whose text matches get a statement the support check finds unsupported. */
    unsupportedMatch: RegExp | null;
    /** The usage every answer reports (default 1,000 prompt and 200 completion tokens). */
    usage: { prompt_tokens: number; completion_tokens: number } | null;
    /** Follows an instruction injected into the prompt (`SYSTEM:`): adds OBEYED and quotes of the notes. */
    obey: boolean;
  };
  /** Called at each extraction call (a test kills the platform there). */
  onExtract?: () => void;
  close(): Promise<void>;
}

const usageOf = (u: { prompt_tokens: number; completion_tokens: number } | null) => {
  const { prompt_tokens, completion_tokens } = u ?? { prompt_tokens: 1000, completion_tokens: 200 };
  return { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
};

const KINDS = ['decision', 'action_item', 'question', 'fact'] as const;

/** What an obeying model adds: the injected claim, quoted with words nobody said, then with an empty, a blank and no quote at all. */
export const OBEYED_CLAIM = 'The CEO resigned';
export const OBEYED_QUOTE = 'The CEO resigned effective immediately and the board agreed';
const OBEYED = [
  { kind: 'decision', statement: OBEYED_CLAIM, quote: OBEYED_QUOTE, start: '00:00:00', end: '00:00:04', owner: null, due: null },
  { kind: 'decision', statement: `${OBEYED_CLAIM} (empty quote)`, quote: '', start: null, end: null, owner: null, due: null },
  { kind: 'fact', statement: `${OBEYED_CLAIM} (blank quote)`, quote: ' \n\t ', start: null, end: null, owner: null, due: null },
  { kind: 'fact', statement: `${OBEYED_CLAIM} (no quote)`, start: null, end: null, owner: null, due: null },
];
const LINE = /^\[(\d\d:\d\d:\d\d)(?:-(\d\d:\d\d:\d\d))?\] (.+)$/;

export async function startFakeKnowledgeChat(): Promise<FakeKnowledgeChat> {
  const fake = { baseUrl: '', close: async () => undefined, calls: { extract: 0, reconcile: 0, other: 0 }, requests: [], behavior: { delayMs: 0, invent: 0, failNext: 0, unsupported: false, unsupportedMatch: null, usage: null, obey: false } } as FakeKnowledgeChat;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const body = raw ? JSON.parse(raw) : {};
      fake.requests.push(body);
      const name = body.response_format?.json_schema?.name;
      if (name === 'knowledge_entries') {
        fake.calls.extract++;
        fake.onExtract?.();
      } else if (name === 'evidence_verdicts') fake.calls.reconcile++;
      else fake.calls.other++;
      if (fake.behavior.delayMs) await new Promise((r) => setTimeout(r, fake.behavior.delayMs));
      if (fake.behavior.failNext > 0) {
        fake.behavior.failNext--;
        res.writeHead(500, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: 'fake failure' } }));
      }
      const user = String(body.messages?.find((m: any) => m.role === 'user')?.content ?? '');
      let content: string;
      if (name === 'knowledge_entries') {
        const entries: object[] = [];
        let i = 0;
        let inTranscript = false;
        for (const raw of user.split('\n')) {
          const line = raw.trim();
          if (line === '<transcript>' || line === '</transcript>') {
            inTranscript = line === '<transcript>';
            continue;
          }
          const m = LINE.exec(line);
          // A line without a stamp counts only inside the transcript (the prompt's other lines are not said).
          const [text, start, end] = m ? [m[3], m[1], m[2] ?? m[1]] : inTranscript && line ? [line, null, null] : [];
          if (!text) continue;
          const kind = KINDS[i++ % KINDS.length];
          const unsupported = fake.behavior.unsupported || !!fake.behavior.unsupportedMatch?.test(text);
          entries.push({ kind, statement: `${unsupported ? 'UNSUPPORTED ' : ''}Said: ${text}`, quote: text, start, end, owner: kind === 'action_item' ? 'Ada' : null, due: null });
        }
        if (fake.behavior.obey && user.includes('SYSTEM:')) {
          entries.push(...OBEYED);
          const notes = /<notes>\n([\s\S]*?)\n<\/notes>/.exec(user)?.[1] ?? '';
          for (const line of notes.split('\n').map((l) => l.trim()).filter(Boolean)) entries.push({ kind: 'fact', statement: `Noted: ${line}`, quote: line, start: '00:00:00', end: '00:00:02', owner: null, due: null });
        }
        for (let k = 0; k < fake.behavior.invent; k++) entries.push({ kind: 'decision', statement: 'Invented decision', quote: `the board approved budget line ${k} unanimously`, start: '00:00:01', end: '00:00:03', owner: null, due: null });
        content = JSON.stringify({ entries });
      } else if (name === 'evidence_verdicts') {
        const verdicts = user
          .split('\n')
          .map((l) => {
            try {
              return JSON.parse(l);
            } catch {
              return undefined;
            }
          })
          .filter((v) => v && typeof v.index === 'number')
          .map((v) => ({ index: v.index, supported: !String(v.statement).includes('UNSUPPORTED') }));
        content = JSON.stringify({ verdicts });
      } else content = 'The recording covers the points listed.';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'chatcmpl-k', object: 'chat.completion', created: 1_700_000_000, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: usageOf(fake.behavior.usage) }));
    });
  });
  fake.baseUrl = await listen(server);
  fake.close = () => closeServer(server);
  return fake;
}
