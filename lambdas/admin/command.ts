/**
 * What an admin CLI command is, and what is generated from its definition alone: its usage line,
 * its `--help`, the CLI's `--help`, and the README's table of commands (a test keeps them equal).
 */
import type { Engine } from '../engine/ports.js';

export type Options = Record<string, string | boolean | undefined>;

export interface OptionDefinition {
  type: 'string' | 'boolean';
  /** The placeholder of a string option's value in the usage line (`ID`, `a,b`). */
  value?: string;
  /** What it means, where its name and placeholder do not say it; shown by `--help` and in the README. */
  help?: string;
}

export interface Command {
  /** What it does and prints (markdown: the README's table shows it as it is). */
  summary: string;
  options: Record<string, OptionDefinition>;
  required: string[];
  /** Options of which exactly one must be given. */
  oneOf?: string[];
  run(engine: Engine, o: Options): Promise<unknown>;
}

export const PROGRAM = 'npm run --silent admin --';

const flag = (name: string, o: OptionDefinition) => (o.type === 'boolean' ? `--${name}` : `--${name} ${o.value ?? 'VALUE'}`);

/** `--org ID --name N [--app ID] (--routes a,b | --all)`: required first, then the others in their order. */
export function usageLine(name: string, c: Command): string {
  const entries = Object.entries(c.options);
  const choice = c.oneOf ?? [];
  const parts = [
    ...entries.filter(([k]) => c.required.includes(k)).map(([k, o]) => flag(k, o)),
    ...(choice.length ? [`(${choice.map((k) => flag(k, c.options[k])).join(' | ')})`] : []),
    ...entries.filter(([k]) => !c.required.includes(k) && !choice.includes(k)).map(([k, o]) => `[${flag(k, o)}]`),
  ];
  return [name, ...parts].join(' ');
}

/** The CLI's own help: every command's usage line. */
export function programHelp(commands: Record<string, Command>, only?: string): string {
  const names = Object.keys(commands).filter((n) => only === undefined || n.split(' ')[0] === only);
  return [
    `usage: ${PROGRAM} <command> [options]`,
    '',
    'Prints one JSON document on stdout; an error goes to stderr as {"error": "..."}, exit code 2 for',
    'a usage error, 1 for anything else. It acts on the store the environment selects: DATA_DIR',
    '(default .platform), or ENGINE=aws with the stack\'s TABLE_NAME.',
    '',
    'commands:',
    ...names.map((n) => `  ${usageLine(n, commands[n])}`),
    '',
    `${PROGRAM} <command> --help  shows what a command does and prints`,
  ].join('\n');
}

/** One command's help: usage, summary, then each option with what it means. */
export function commandHelp(name: string, c: Command): string {
  const rows = [...Object.entries(c.options).map(([k, o]) => [flag(k, o), optionNote(k, c, o)] as const), ['-h, --help', 'this help'] as const];
  const width = Math.max(...rows.map(([f]) => f.length));
  return [
    `usage: ${PROGRAM} ${usageLine(name, c)}`,
    '',
    plain(c.summary),
    '',
    'options:',
    ...rows.map(([f, note]) => `  ${f.padEnd(width)}  ${plain(note)}`.trimEnd()),
  ].join('\n');
}

function optionNote(name: string, c: Command, o: OptionDefinition): string {
  const tags = [c.required.includes(name) ? 'required' : '', c.oneOf?.includes(name) ? `or ${c.oneOf.filter((k) => k !== name).map((k) => `--${k}`).join(', ')}` : '']
    .filter(Boolean)
    .join(', ');
  return [tags && `(${tags})`, o.help ?? ''].filter(Boolean).join(' ');
}

/** Markdown to terminal text: the code spans' backticks go. */
const plain = (markdown: string) => markdown.replace(/`([^`]*)`/g, '$1');

/** The README's table of commands: usage line, then what it prints and each option's meaning. */
export function commandsTable(commands: Record<string, Command>): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|');
  const rows = Object.entries(commands).map(([name, c]) => {
    const notes = Object.entries(c.options).flatMap(([k, o]) => (o.help ? [`\`--${k}\`: ${o.help}`] : []));
    return `| \`${cell(usageLine(name, c))}\` | ${cell([c.summary, ...notes].join('; '))} |`;
  });
  return ['| command | prints |', '|---|---|', ...rows].join('\n');
}
