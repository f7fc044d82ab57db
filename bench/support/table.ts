/** Plain-text tables for the terminal (and pasteable as Markdown). */

export interface Table {
  title?: string;
  headers: string[];
  rows: string[][];
  /** Per column: 'r' right-aligns (numbers); default left. */
  align?: ('l' | 'r')[];
}

export function formatTable(table: Table): string {
  const widths = table.headers.map((h, i) => Math.max(h.length, ...table.rows.map((r) => (r[i] ?? '').length)));
  const cell = (text: string, i: number) => (table.align?.[i] === 'r' ? text.padStart(widths[i]) : text.padEnd(widths[i]));
  const line = (cells: string[]) => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (table.align?.[i] === 'r' ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
  const out = [line(table.headers), rule, ...table.rows.map(line)];
  if (table.title) out.unshift(table.title, '');
  return out.join('\n');
}

export const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');
export const fmt = (n: number | undefined, digits = 1) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n.toFixed(digits));
