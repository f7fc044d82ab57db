/**
 * Collection rules (docs/data/rules.md): who may list, view, create, update and delete records.
 *
 * A rule is `null` (no one but server credentials), `""` (server credentials only), `"public"`,
 * `"users"` or an expression. Rules are parsed once, when the collection is saved, into a
 * `CompiledRule`: plain JSON data stored with the collection and evaluated per request without
 * parsing again.
 */
import { isServerCredential, type Principal } from '../auth/principal.js';

export type Rule = null | string;
export type RuleAction = 'list' | 'view' | 'create' | 'update' | 'delete';
export const RULE_ACTIONS: readonly RuleAction[] = ['list', 'view', 'create', 'update', 'delete'];

/** Longest rule accepted, in characters (Unicode code points). */
export const MAX_RULE_LENGTH = 1024;
/** Deepest nesting accepted: every `(` and every `!` opens one level. */
export const MAX_RULE_DEPTH = 32;

export type Literal = string | number | boolean | null;
export type CompareOp = '=' | '!=' | '<' | '<=' | '>' | '>=';

export type RuleOperand =
  /** `@auth.id`, `@auth.kind` or `@auth.<claim>`. */
  | { type: 'auth'; name: string }
  /** A bare identifier: the stored record's field. */
  | { type: 'field'; name: string }
  /** `@request.<field>`: the value the request sends. */
  | { type: 'request'; name: string }
  | { type: 'literal'; value: Literal };

export type RuleExpr =
  | { type: 'or'; items: RuleExpr[] }
  | { type: 'and'; items: RuleExpr[] }
  | { type: 'not'; expr: RuleExpr }
  | { type: 'compare'; op: CompareOp; left: RuleOperand; right: RuleOperand }
  /** A lone operand, tested for truthiness. */
  | { type: 'test'; operand: RuleOperand };

export type CompiledRule =
  | { kind: 'nobody' }
  | { kind: 'server' }
  | { kind: 'public' }
  | { kind: 'users' }
  | { kind: 'expr'; ast: RuleExpr };

/** A rule that cannot be parsed, or a rules object of the wrong shape. */
export class RuleSyntaxError extends Error {
  override name = 'RuleSyntaxError';
  constructor(
    message: string,
    /** 1-based character position in the rule (end of rule = length + 1); null when not about a position. */
    readonly position: number | null = null,
    /** The rule's action, when known (set by validateRules / compileRules). */
    readonly action: RuleAction | null = null,
  ) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

type Token =
  | { t: 'op'; v: CompareOp | '&&' | '||' | '!' | '(' | ')'; pos: number }
  | { t: 'operand'; v: RuleOperand; pos: number; text: string }
  | { t: 'end'; pos: number };

const isIdentStart = (c: string) => /^[A-Za-z_]$/.test(c);
const isIdentPart = (c: string) => /^[A-Za-z0-9_]$/.test(c);
const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r';

const fail = (message: string, pos: number): never => {
  throw new RuleSyntaxError(`${message} at position ${pos}`, pos);
};

const describeToken = (tok: Token): string => (tok.t === 'end' ? 'end of rule' : tok.t === 'op' ? `'${tok.v}'` : `'${tok.text}'`);

function tokenize(chars: string[]): Token[] {
  const out: Token[] = [];
  let i = 0;
  const ident = (): string => {
    const start = i;
    while (i < chars.length && isIdentPart(chars[i])) i++;
    return chars.slice(start, i).join('');
  };
  while (i < chars.length) {
    const c = chars[i];
    const pos = i + 1;
    const next = chars[i + 1];
    if (isSpace(c)) {
      i++;
      continue;
    }
    if (c === '(' || c === ')') {
      out.push({ t: 'op', v: c, pos });
      i++;
    } else if (c === '&' || c === '|') {
      if (next !== c) fail(`expected '${c}${c}'`, pos);
      out.push({ t: 'op', v: c === '&' ? '&&' : '||', pos });
      i += 2;
    } else if (c === '=') {
      if (next === '=') fail(`use '=' for equality, not '=='`, pos);
      out.push({ t: 'op', v: '=', pos });
      i++;
    } else if (c === '!') {
      if (next === '=') {
        out.push({ t: 'op', v: '!=', pos });
        i += 2;
      } else {
        out.push({ t: 'op', v: '!', pos });
        i++;
      }
    } else if (c === '<' || c === '>') {
      if (next === '=') {
        out.push({ t: 'op', v: c === '<' ? '<=' : '>=', pos });
        i += 2;
      } else {
        out.push({ t: 'op', v: c, pos });
        i++;
      }
    } else if (c === '"' || c === "'") {
      const quote = c;
      let value = '';
      i++;
      for (;;) {
        if (i >= chars.length) fail('unterminated string', pos);
        const d = chars[i];
        if (d === quote) {
          i++;
          break;
        }
        if (d === '\\') {
          const e = chars[i + 1];
          if (e === undefined) fail('unterminated string', pos);
          if (e === '\\' || e === '"' || e === "'") value += e;
          else if (e === 'n') value += '\n';
          else if (e === 't') value += '\t';
          else if (e === 'r') value += '\r';
          else if (e === 'u') {
            const hex = chars.slice(i + 2, i + 6).join('');
            if (!/^[0-9A-Fa-f]{4}$/.test(hex)) fail(`'\\u' needs four hex digits`, i + 1);
            value += String.fromCharCode(parseInt(hex, 16));
            i += 4;
          } else fail(`unknown escape '\\${e}'`, i + 1);
          i += 2;
          continue;
        }
        value += d;
        i++;
      }
      out.push({ t: 'operand', v: { type: 'literal', value }, pos, text: chars.slice(pos - 1, i).join('') });
    } else if (isDigit(c) || (c === '-' && isDigit(next))) {
      const start = i;
      if (c === '-') i++;
      while (isDigit(chars[i])) i++;
      if (chars[i] === '.') {
        if (!isDigit(chars[i + 1])) fail('expected a digit after the decimal point', i + 2);
        i++;
        while (isDigit(chars[i])) i++;
      }
      if (i < chars.length && (isIdentPart(chars[i]) || chars[i] === '.')) fail(`malformed number`, pos);
      const text = chars.slice(start, i).join('');
      const value = Number(text);
      if (!Number.isFinite(value)) fail('number out of range', pos);
      out.push({ t: 'operand', v: { type: 'literal', value }, pos, text });
    } else if (c === '@') {
      i++;
      const scope = ident();
      if (scope !== 'auth' && scope !== 'request') {
        fail(`unknown '@${scope}': expected '@auth.<name>' or '@request.<field>'`, pos);
      }
      if (chars[i] !== '.' || !isIdentStart(chars[i + 1] ?? '')) fail(`expected '.<name>' after '@${scope}'`, i + 1);
      i++;
      const name = ident();
      const v: RuleOperand = scope === 'auth' ? { type: 'auth', name } : { type: 'request', name };
      out.push({ t: 'operand', v, pos, text: `@${scope}.${name}` });
    } else if (isIdentStart(c)) {
      const name = ident();
      const v: RuleOperand =
        name === 'true' ? { type: 'literal', value: true }
        : name === 'false' ? { type: 'literal', value: false }
        : name === 'null' ? { type: 'literal', value: null }
        : { type: 'field', name };
      out.push({ t: 'operand', v, pos, text: name });
    } else {
      fail(`unexpected character '${c}'`, pos);
    }
    // An operand running straight into a '.' (e.g. `a.b`, `@auth.id.x`) is not part of the grammar.
    if (chars[i] === '.') fail(`unexpected '.'`, i + 1);
  }
  out.push({ t: 'end', pos: chars.length + 1 });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Parser: or := and ('||' and)* ; and := unary ('&&' unary)* ; unary := '!' unary | primary ;
//         primary := '(' or ')' | comparison ; comparison := operand (op operand)?

const COMPARE_OPS = new Set<string>(['=', '!=', '<', '<=', '>', '>=']);

function parseExpression(chars: string[]): RuleExpr {
  const tokens = tokenize(chars);
  let k = 0;
  const peek = () => tokens[k];
  const isOp = (v: string) => {
    const tok = tokens[k];
    return tok.t === 'op' && tok.v === v;
  };
  const enter = (depth: number, pos: number) => {
    if (depth > MAX_RULE_DEPTH) fail(`rule nested deeper than ${MAX_RULE_DEPTH} levels`, pos);
  };

  const parseOr = (depth: number): RuleExpr => {
    const items = [parseAnd(depth)];
    while (isOp('||')) {
      k++;
      items.push(parseAnd(depth));
    }
    return items.length === 1 ? items[0] : { type: 'or', items };
  };
  const parseAnd = (depth: number): RuleExpr => {
    const items = [parseUnary(depth)];
    while (isOp('&&')) {
      k++;
      items.push(parseUnary(depth));
    }
    return items.length === 1 ? items[0] : { type: 'and', items };
  };
  const parseUnary = (depth: number): RuleExpr => {
    if (isOp('!')) {
      enter(depth + 1, peek().pos);
      k++;
      return { type: 'not', expr: parseUnary(depth + 1) };
    }
    return parsePrimary(depth);
  };
  const parsePrimary = (depth: number): RuleExpr => {
    if (isOp('(')) {
      const open = peek();
      enter(depth + 1, open.pos);
      k++;
      if (isOp(')')) fail('empty parentheses', open.pos);
      const inner = parseOr(depth + 1);
      if (!isOp(')')) fail(`expected ')' to close the '(' at position ${open.pos}, found ${describeToken(peek())}`, peek().pos);
      k++;
      return inner;
    }
    const left = parseOperand();
    const tok = peek();
    if (tok.t === 'op' && COMPARE_OPS.has(tok.v)) {
      k++;
      const right = parseOperand();
      return { type: 'compare', op: tok.v as CompareOp, left, right };
    }
    return { type: 'test', operand: left };
  };
  const parseOperand = (): RuleOperand => {
    const tok = peek();
    if (tok.t !== 'operand') {
      return fail(tok.t === 'end' ? 'expression ends too early' : `expected a value, found ${describeToken(tok)}`, tok.pos);
    }
    k++;
    return tok.v;
  };

  const ast = parseOr(0);
  const tok = peek();
  if (tok.t !== 'end') fail(`unexpected ${describeToken(tok)}`, tok.pos);
  return ast;
}

/**
 * Compiles a rule. `null`, `""`, `"public"` and `"users"` (exactly) are the special forms;
 * anything else is an expression. Throws RuleSyntaxError.
 */
export function parseRule(rule: Rule): CompiledRule {
  if (rule === null) return { kind: 'nobody' };
  if (typeof rule !== 'string') throw new RuleSyntaxError('a rule must be null or a string');
  if (rule === '') return { kind: 'server' };
  if (rule === 'public') return { kind: 'public' };
  if (rule === 'users') return { kind: 'users' };
  const chars = Array.from(rule);
  if (chars.length > MAX_RULE_LENGTH) {
    fail(`rule longer than ${MAX_RULE_LENGTH} characters`, MAX_RULE_LENGTH + 1);
  }
  const trimmed = rule.trim();
  if (trimmed === '') {
    fail(`empty expression (use "" for server credentials only)`, 1);
  }
  if (trimmed === 'public' || trimmed === 'users') {
    fail(`'${trimmed}' is a special form only when the rule is exactly '${trimmed}', without spaces`, 1);
  }
  return { kind: 'expr', ast: parseExpression(chars) };
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/**
 * What a rule says about a principal before any record is seen: server credentials always pass;
 * `null`/`""` refuse everyone else; `users` refuses anything but end-user tokens; an expression depends.
 */
export function ruleAllowsPrincipal(rule: CompiledRule, principal: Principal): 'yes' | 'no' | 'depends' {
  if (isServerCredential(principal)) return 'yes';
  switch (rule.kind) {
    case 'nobody':
    case 'server':
      return 'no';
    case 'public':
      return 'yes';
    case 'users':
      return principal.kind === 'end_user' ? 'yes' : 'no';
    case 'expr':
      return 'depends';
  }
}

const own = (obj: Record<string, unknown> | null | undefined, key: string): unknown =>
  obj != null && Object.hasOwn(obj, key) ? obj[key] : null;

const norm = (v: unknown): unknown => (v === undefined ? null : v);

function jsonEqual(a: unknown, b: unknown): boolean {
  a = norm(a);
  b = norm(b);
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => jsonEqual(x, b[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((key) => ao[key] !== undefined);
  const bk = Object.keys(bo).filter((key) => bo[key] !== undefined);
  if (ak.length !== bk.length) return false;
  return ak.every((key) => Object.hasOwn(bo, key) && jsonEqual(ao[key], bo[key]));
}

const truthy = (v: unknown): boolean => {
  v = norm(v);
  return !(v === null || v === false || v === 0 || v === '' || (typeof v === 'number' && Number.isNaN(v)));
};

interface EvalInput {
  principal: Principal;
  record: Record<string, unknown> | null;
  request: Record<string, unknown> | null;
}

function operandValue(o: RuleOperand, input: EvalInput): unknown {
  switch (o.type) {
    case 'literal':
      return o.value;
    case 'field':
      return norm(own(input.record, o.name));
    case 'request':
      return norm(own(input.request, o.name));
    case 'auth': {
      const p = input.principal;
      if (o.name === 'id') return p.kind === 'end_user' ? p.userId : null;
      if (o.name === 'kind') return p.kind;
      return p.kind === 'end_user' ? norm(own(p.claims, o.name)) : null;
    }
  }
}

function compare(op: CompareOp, a: unknown, b: unknown): boolean {
  if (op === '=') return jsonEqual(a, b);
  if (op === '!=') return !jsonEqual(a, b);
  const bothNumbers = typeof a === 'number' && typeof b === 'number';
  const bothStrings = typeof a === 'string' && typeof b === 'string';
  if (!bothNumbers && !bothStrings) return false;
  const x = a as number | string;
  const y = b as number | string;
  switch (op) {
    case '<':
      return x < y;
    case '<=':
      return x <= y;
    case '>':
      return x > y;
    case '>=':
      return x >= y;
  }
}

function evalExpr(e: RuleExpr, input: EvalInput): boolean {
  switch (e.type) {
    case 'or':
      return e.items.some((x) => evalExpr(x, input));
    case 'and':
      return e.items.every((x) => evalExpr(x, input));
    case 'not':
      return !evalExpr(e.expr, input);
    case 'compare': {
      const left = operandValue(e.left, input);
      const right = operandValue(e.right, input);
      // An identity the caller does not have matches nothing, not even a missing field: without this,
      // `owner = @auth.id` would let a publishable key (no @auth.id) into every record without an owner.
      if ((e.left.type === 'auth' && left === null) || (e.right.type === 'auth' && right === null)) return false;
      return compare(e.op, left, right);
    }
    case 'test':
      return truthy(operandValue(e.operand, input));
  }
}

/**
 * Whether the rule lets this request through for this record. `record` is the stored record
 * (null for create); `request` holds the values the request sends (null for list, view, delete).
 * Server credentials always pass.
 */
export function evaluateRule(rule: CompiledRule, input: EvalInput): boolean {
  const verdict = ruleAllowsPrincipal(rule, input.principal);
  if (verdict !== 'depends') return verdict === 'yes';
  if (rule.kind !== 'expr') return false;
  return evalExpr(rule.ast, input);
}

// ---------------------------------------------------------------------------------------------
// Rules objects

/**
 * Checks a collection's `rules` as sent: an object with only `list`, `view`, `create`, `update`,
 * `delete`, each null or a string. Omitted (undefined) rules object or key: null. Every expression
 * is parsed so syntax errors surface when the collection is saved. Throws RuleSyntaxError.
 */
export function validateRules(rules: unknown): Record<RuleAction, Rule> {
  const out: Record<RuleAction, Rule> = { list: null, view: null, create: null, update: null, delete: null };
  if (rules === undefined) return out;
  if (rules === null || typeof rules !== 'object' || Array.isArray(rules)) {
    throw new RuleSyntaxError(`rules must be an object with the keys ${RULE_ACTIONS.join(', ')}`);
  }
  const obj = rules as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    if (!(RULE_ACTIONS as readonly string[]).includes(key)) {
      throw new RuleSyntaxError(`rules.${key} is not a rule: the keys are ${RULE_ACTIONS.join(', ')}`);
    }
  }
  for (const action of RULE_ACTIONS) {
    if (!Object.hasOwn(obj, action)) continue;
    const value = obj[action];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') throw new RuleSyntaxError(`rules.${action} must be null or a string`, null, action);
    compileOne(action, value);
    out[action] = value;
  }
  return out;
}

function compileOne(action: RuleAction, rule: Rule): CompiledRule {
  try {
    return parseRule(rule);
  } catch (err) {
    if (err instanceof RuleSyntaxError) throw new RuleSyntaxError(`rules.${action}: ${err.message}`, err.position, action);
    throw err;
  }
}

/** Compiles all five rules (throws RuleSyntaxError naming the action). */
export function compileRules(rules: Record<RuleAction, Rule>): Record<RuleAction, CompiledRule> {
  const out = {} as Record<RuleAction, CompiledRule>;
  for (const action of RULE_ACTIONS) out[action] = compileOne(action, rules[action] ?? null);
  return out;
}

/** Record field names the rule reads: bare identifiers and `@request.<field>`, deduplicated, sorted. */
export function referencedFields(rule: CompiledRule): string[] {
  if (rule.kind !== 'expr') return [];
  const names = new Set<string>();
  const operand = (o: RuleOperand) => {
    if (o.type === 'field' || o.type === 'request') names.add(o.name);
  };
  const walk = (e: RuleExpr): void => {
    switch (e.type) {
      case 'or':
      case 'and':
        e.items.forEach(walk);
        return;
      case 'not':
        walk(e.expr);
        return;
      case 'compare':
        operand(e.left);
        operand(e.right);
        return;
      case 'test':
        operand(e.operand);
        return;
    }
  };
  walk(rule.ast);
  return [...names].sort();
}
