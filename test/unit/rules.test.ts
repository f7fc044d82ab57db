/** Collection rules: special forms per credential kind, the expression grammar, evaluation, rules objects. */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../lambdas/auth/principal.js';
import type { CredentialKind } from '../../lambdas/auth/principal.js';
import {
  compileRules,
  evaluateRule,
  parseRule,
  referencedFields,
  RULE_ACTIONS,
  ruleAllowsPrincipal,
  RuleSyntaxError,
  validateRules,
  type CompiledRule,
  type Rule,
} from '../../lambdas/data/rules.js';

const principal = (kind: CredentialKind, over: Partial<Principal> = {}): Principal => ({
  kind,
  credentialId: `cred_${kind}`,
  organizationId: 'org_1',
  applicationId: kind === 'secret_key' ? null : 'app_1',
  workspaceId: kind === 'secret_key' ? null : 'ws_1',
  capabilities: null,
  userId: kind === 'end_user' ? 'user_1' : null,
  claims: kind === 'end_user' ? { role: 'editor', level: 3, admin: true } : null,
  origins: kind === 'publishable_key' ? ['https://app.example'] : null,
  permissions: kind === 'publishable_key' ? ['events:stream.open'] : kind === 'end_user' ? [] : null,
  ...over,
});

const secret = principal('secret_key');
const oauth = principal('oauth_client');
const pub = principal('publishable_key');
const user = principal('end_user');
const ALL = { secret, oauth, pub, user };

type Rec = Record<string, unknown> | null;
/** Parses, then evaluates the JSON round-tripped compiled rule, so every test also checks storage. */
const ev = (rule: Rule, p: Principal, record: Rec = null, request: Rec = null): boolean => {
  const compiled = parseRule(rule);
  const stored = JSON.parse(JSON.stringify(compiled)) as CompiledRule;
  expect(stored).toEqual(compiled);
  const a = evaluateRule(compiled, { principal: p, record, request });
  expect(evaluateRule(stored, { principal: p, record, request })).toBe(a);
  return a;
};
const syntaxError = (rule: string): RuleSyntaxError => {
  try {
    parseRule(rule);
  } catch (err) {
    expect(err).toBeInstanceOf(RuleSyntaxError);
    return err as RuleSyntaxError;
  }
  throw new Error(`expected a syntax error for ${JSON.stringify(rule)}`);
};

describe('special forms', () => {
  it('compile to their kinds', () => {
    expect(parseRule(null)).toEqual({ kind: 'nobody' });
    expect(parseRule('')).toEqual({ kind: 'server' });
    expect(parseRule('public')).toEqual({ kind: 'public' });
    expect(parseRule('users')).toEqual({ kind: 'users' });
    expect(parseRule('owner = @auth.id').kind).toBe('expr');
  });

  const table: Array<[Rule, Record<keyof typeof ALL, 'yes' | 'no' | 'depends'>]> = [
    [null, { secret: 'yes', oauth: 'yes', pub: 'no', user: 'no' }],
    ['', { secret: 'yes', oauth: 'yes', pub: 'no', user: 'no' }],
    ['public', { secret: 'yes', oauth: 'yes', pub: 'yes', user: 'yes' }],
    ['users', { secret: 'yes', oauth: 'yes', pub: 'no', user: 'yes' }],
    ['false', { secret: 'yes', oauth: 'yes', pub: 'depends', user: 'depends' }],
  ];
  for (const [rule, expected] of table) {
    for (const [name, p] of Object.entries(ALL) as Array<[keyof typeof ALL, Principal]>) {
      it(`${JSON.stringify(rule)} for ${name}: ${expected[name]}`, () => {
        const compiled = parseRule(rule);
        expect(ruleAllowsPrincipal(compiled, p)).toBe(expected[name]);
        const verdict = expected[name] === 'depends' ? false : expected[name] === 'yes';
        expect(ev(rule, p, { a: 1 }, null)).toBe(verdict);
        expect(ev(rule, p, null, { a: 1 })).toBe(verdict);
      });
    }
  }

  it('server credentials pass any expression, even one false for everyone', () => {
    for (const p of [secret, oauth]) {
      expect(ev('false', p)).toBe(true);
      expect(ev('owner = @auth.id && @auth.kind = "end_user"', p, { owner: 'someone' })).toBe(true);
    }
  });

  it('whitespace around a special form is refused rather than read as a field', () => {
    expect(syntaxError(' public').message).toMatch(/special form/);
    expect(syntaxError('users\n').message).toMatch(/special form/);
    expect(syntaxError('   ').message).toMatch(/empty expression/);
  });

  it('public and users are ordinary fields inside a larger expression', () => {
    expect(ev('public = true', pub, { public: true })).toBe(true);
    expect(ev('users > 2', pub, { users: 3 })).toBe(true);
  });
});

describe('operands', () => {
  it('@auth.id is the end user id, null for a publishable key', () => {
    expect(ev('@auth.id = "user_1"', user)).toBe(true);
    expect(ev('@auth.id = null', user)).toBe(false);
    // A missing identity compares false with anything, null included (see the owner-only pitfall).
    expect(ev('@auth.id = null', pub)).toBe(false);
    expect(ev('@auth.id != null', pub)).toBe(false);
    expect(ev('@auth.id', pub)).toBe(false);
    expect(ev('!@auth.id', pub)).toBe(true);
    // A publishable key never exposes a userId even if one were set.
    expect(ev('@auth.id = "x"', principal('publishable_key', { userId: 'x' }))).toBe(false);
  });

  it('@auth.kind is end_user or publishable_key', () => {
    expect(ev('@auth.kind = "end_user"', user)).toBe(true);
    expect(ev('@auth.kind = "end_user"', pub)).toBe(false);
    expect(ev("@auth.kind = 'publishable_key'", pub)).toBe(true);
  });

  it('@auth.<claim> reads the end user claims, null when absent', () => {
    expect(ev('@auth.role = "editor"', user)).toBe(true);
    expect(ev('@auth.level >= 3', user)).toBe(true);
    expect(ev('@auth.admin', user)).toBe(true);
    expect(ev('@auth.missing = null', user)).toBe(false);
    expect(ev('!@auth.missing', user)).toBe(true);
    expect(ev('@auth.role = "editor"', pub)).toBe(false);
    expect(ev('@auth.role', principal('end_user', { claims: null }))).toBe(false);
    // Inherited properties are not claims.
    expect(ev('!@auth.constructor', user)).toBe(true);
    expect(ev('@auth.toString', user)).toBe(false);
  });

  it('a bare identifier is the stored record field; null on create', () => {
    expect(ev('owner = @auth.id', user, { owner: 'user_1' })).toBe(true);
    expect(ev('owner = @auth.id', user, { owner: 'user_2' })).toBe(false);
    expect(ev('owner = null', user, null)).toBe(true);
    expect(ev('owner = null', user, {})).toBe(true);
    expect(ev('owner = null', user, { owner: undefined })).toBe(true);
    expect(ev('constructor = null', user, {})).toBe(true);
    expect(ev('__proto__', user, {})).toBe(false);
  });

  it('@request.<field> is the value sent; null when not sent or for view/list/delete', () => {
    expect(ev('@request.owner = @auth.id', user, null, { owner: 'user_1' })).toBe(true);
    expect(ev('@request.owner = @auth.id', user, null, { owner: 'user_2' })).toBe(false);
    expect(ev('@request.owner = @auth.id', user, null, {})).toBe(false);
    expect(ev('@request.owner = null', user, { owner: 'user_1' }, null)).toBe(true);
    expect(ev('@request.toString = null', user, null, {})).toBe(true);
  });

  it('record fields and request values are kept apart', () => {
    const record = { status: 'draft' };
    const request = { status: 'published' };
    expect(ev('status = "draft" && @request.status = "published"', user, record, request)).toBe(true);
    expect(ev('status = @request.status', user, record, request)).toBe(false);
    expect(ev('status = @request.status', user, record, { status: 'draft' })).toBe(true);
  });

  it('literals: strings with escapes, numbers, booleans, null', () => {
    expect(ev(`s = "a\\"b"`, user, { s: 'a"b' })).toBe(true);
    expect(ev(`s = 'it\\'s'`, user, { s: "it's" })).toBe(true);
    expect(ev(`s = 'say "hi"'`, user, { s: 'say "hi"' })).toBe(true);
    expect(ev(`s = "back\\\\slash"`, user, { s: 'back\\slash' })).toBe(true);
    expect(ev(`s = "a\\nb\\tc\\rd"`, user, { s: 'a\nb\tc\rd' })).toBe(true);
    expect(ev(`s = "\\u00e9t\\u00E9"`, user, { s: 'été' })).toBe(true);
    expect(ev(`s = "été ✓ 😀"`, user, { s: 'été ✓ 😀' })).toBe(true);
    expect(ev(`s = ""`, user, { s: '' })).toBe(true);
    expect(ev('n = 42', user, { n: 42 })).toBe(true);
    expect(ev('n = -7', user, { n: -7 })).toBe(true);
    expect(ev('n = 2.5', user, { n: 2.5 })).toBe(true);
    expect(ev('n = -0.25', user, { n: -0.25 })).toBe(true);
    expect(ev('n = 0', user, { n: -0 })).toBe(true);
    expect(ev('b = true', user, { b: true })).toBe(true);
    expect(ev('b = false', user, { b: false })).toBe(true);
    expect(ev('b = null', user, { b: null })).toBe(true);
    expect(parseRule('x = -3.5')).toEqual({
      kind: 'expr',
      ast: { type: 'compare', op: '=', left: { type: 'field', name: 'x' }, right: { type: 'literal', value: -3.5 } },
    });
  });
});

describe('operators', () => {
  it('= and != are strict JSON equality', () => {
    expect(ev('n = "1"', user, { n: 1 })).toBe(false);
    expect(ev('n != "1"', user, { n: 1 })).toBe(true);
    expect(ev('b = 1', user, { b: true })).toBe(false);
    expect(ev('s = null', user, { s: '' })).toBe(false);
    expect(ev('n = 0', user, { n: false })).toBe(false);
    expect(ev('a = b', user, { a: [1, { x: 'y' }], b: [1, { x: 'y' }] })).toBe(true);
    expect(ev('a = b', user, { a: [1, 2], b: [2, 1] })).toBe(false);
    expect(ev('a = b', user, { a: { x: 1, y: 2 }, b: { y: 2, x: 1 } })).toBe(true);
    expect(ev('a = b', user, { a: { x: 1 }, b: { x: 1, y: 2 } })).toBe(false);
    expect(ev('a = b', user, { a: [], b: {} })).toBe(false);
    expect(ev('a != b', user, { a: { x: 1 }, b: { x: 2 } })).toBe(true);
  });

  it('< <= > >= compare two numbers or two strings, otherwise false', () => {
    const r = { n: 5, s: 'm', t: null };
    expect(ev('n < 6', user, r)).toBe(true);
    expect(ev('n < 5', user, r)).toBe(false);
    expect(ev('n <= 5', user, r)).toBe(true);
    expect(ev('n > 4.5', user, r)).toBe(true);
    expect(ev('n >= 5', user, r)).toBe(true);
    expect(ev('n >= 5.01', user, r)).toBe(false);
    expect(ev('n > -1', user, r)).toBe(true);
    expect(ev('s > "a"', user, r)).toBe(true);
    expect(ev('s < "z"', user, r)).toBe(true);
    expect(ev('s <= "m"', user, r)).toBe(true);
    expect(ev('"B" < "a"', user, r)).toBe(true); // code unit order
    for (const op of ['<', '<=', '>', '>=']) {
      expect(ev(`n ${op} "5"`, user, r)).toBe(false);
      expect(ev(`s ${op} 1`, user, r)).toBe(false);
      expect(ev(`t ${op} 1`, user, r)).toBe(false);
      expect(ev(`t ${op} null`, user, r)).toBe(false);
      expect(ev(`!(n ${op} "5")`, user, r)).toBe(true);
    }
  });

  it('a lone operand is tested for truthiness', () => {
    for (const v of [null, false, 0, '']) expect(ev('x', user, { x: v })).toBe(false);
    for (const v of [true, 1, -1, 'no', [], {}]) expect(ev('x', user, { x: v })).toBe(true);
    expect(ev('x', user, {})).toBe(false);
    expect(ev('!x', user, {})).toBe(true);
    expect(ev('true', pub)).toBe(true);
    expect(ev('0', pub)).toBe(false);
    expect(ev('"0"', pub)).toBe(true);
  });

  it('&&, || and !', () => {
    const r = { a: true, b: false };
    expect(ev('a && b', user, r)).toBe(false);
    expect(ev('a && !b', user, r)).toBe(true);
    expect(ev('a || b', user, r)).toBe(true);
    expect(ev('b || b', user, r)).toBe(false);
    expect(ev('!a', user, r)).toBe(false);
    expect(ev('!!a', user, r)).toBe(true);
    expect(ev('a && a && a && b', user, r)).toBe(false);
    expect(ev('b || b || b || a', user, r)).toBe(true);
  });

  it('&& binds tighter than ||', () => {
    expect(parseRule('a || b && c')).toEqual({
      kind: 'expr',
      ast: {
        type: 'or',
        items: [
          { type: 'test', operand: { type: 'field', name: 'a' } },
          {
            type: 'and',
            items: [
              { type: 'test', operand: { type: 'field', name: 'b' } },
              { type: 'test', operand: { type: 'field', name: 'c' } },
            ],
          },
        ],
      },
    });
    expect(ev('a || b && c', user, { a: true, b: false, c: false })).toBe(true);
    expect(ev('a && b || c', user, { a: false, b: false, c: true })).toBe(true);
    expect(ev('(a || b) && c', user, { a: true, b: false, c: false })).toBe(false);
  });

  it('! applies to a whole comparison: !a = b is !(a = b)', () => {
    expect(parseRule('!a = b')).toEqual({
      kind: 'expr',
      ast: {
        type: 'not',
        expr: { type: 'compare', op: '=', left: { type: 'field', name: 'a' }, right: { type: 'field', name: 'b' } },
      },
    });
    expect(ev('!a = b', user, { a: 1, b: 1 })).toBe(false);
    expect(ev('!a = b', user, { a: 1, b: 2 })).toBe(true);
    expect(ev('!a = false', user, { a: true })).toBe(true); // !(true = false), not (!true) = false
  });

  it('! binds tighter than && and ||', () => {
    expect(ev('!a && b', user, { a: false, b: true })).toBe(true);
    expect(ev('!a || b', user, { a: true, b: false })).toBe(false);
    expect(ev('!(a || b)', user, { a: false, b: false })).toBe(true);
  });

  it('parentheses group and may nest', () => {
    expect(ev('((a))', user, { a: 1 })).toBe(true);
    expect(ev('(a = 1) && (b = 2 || (c = 3 && !d))', user, { a: 1, b: 0, c: 3, d: false })).toBe(true);
    expect(ev('(a = 1) && (b = 2 || (c = 3 && !d))', user, { a: 1, b: 0, c: 3, d: true })).toBe(false);
  });

  it('whitespace is free between tokens, optional around operators', () => {
    expect(ev('a=1&&b!=2||c<=3', user, { a: 1, b: 3 })).toBe(true);
    expect(ev('\n\t a\n=\r\n1 ', user, { a: 1 })).toBe(true);
    expect(ev('!(a)', user, { a: 0 })).toBe(true);
  });
});

describe('examples from the docs', () => {
  it('owner only', () => {
    expect(ev('owner = @auth.id', user, { owner: 'user_1' })).toBe(true);
    expect(ev('owner = @auth.id', user, { owner: 'user_2' })).toBe(false);
    // No identity matches nothing: a publishable key does not own ownerless records.
    expect(ev('owner = @auth.id', pub, { owner: null })).toBe(false);
    expect(ev('owner = @auth.id', pub, {})).toBe(false);
    expect(ev('@auth.id != null && owner = @auth.id', pub, { owner: null })).toBe(false);
    expect(ev('@auth.id != null && owner = @auth.id', user, { owner: 'user_1' })).toBe(true);
  });

  it('publish flow', () => {
    const rule = 'status = "published" || owner = @auth.id';
    expect(ev(rule, pub, { status: 'published', owner: 'user_2' })).toBe(true);
    expect(ev(rule, pub, { status: 'draft', owner: 'user_2' })).toBe(false);
    expect(ev(rule, user, { status: 'draft', owner: 'user_1' })).toBe(true);
  });

  it('create only as yourself', () => {
    const rule = '@request.owner = @auth.id';
    expect(ev(rule, user, null, { owner: 'user_1', title: 'x' })).toBe(true);
    expect(ev(rule, user, null, { owner: 'user_2' })).toBe(false);
    expect(ev(rule, user, null, { title: 'x' })).toBe(false);
  });
});

describe('syntax errors', () => {
  const cases: Array<[string, RegExp, number]> = [
    ['s = "abc', /unterminated string/, 5],
    ["s = 'abc\\'", /unterminated string/, 5],
    ['s = "a\\', /unterminated string/, 5],
    ['s = "\\x"', /unknown escape/, 6],
    ['s = "\\u12"', /four hex digits/, 6],
    ['a &&', /ends too early/, 5],
    ['a ||', /ends too early/, 5],
    ['&& a', /expected a value, found '&&'/, 1],
    ['a =', /ends too early/, 4],
    ['a = && b', /expected a value, found '&&'/, 5],
    ['!', /ends too early/, 2],
    ['a !', /unexpected '!'/, 3],
    ['a & b', /expected '&&'/, 3],
    ['a | b', /expected '\|\|'/, 3],
    ['a == b', /use '=' for equality/, 3],
    ['a = = b', /expected a value, found '='/, 5],
    ['a = b = c', /unexpected '='/, 7],
    ['(a) = b', /unexpected '='/, 5],
    ['@thing.x = 1', /unknown '@thing'/, 1],
    ['@ = 1', /unknown '@'/, 1],
    ['@auth = 1', /expected '\.<name>' after '@auth'/, 6],
    ['@auth. = 1', /expected '\.<name>' after '@auth'/, 6],
    ['@request = 1', /expected '\.<name>' after '@request'/, 9],
    ['@auth.id.x = 1', /unexpected '\.'/, 9],
    ['a.b = 1', /unexpected '\.'/, 2],
    ['()', /empty parentheses/, 1],
    ['a && ()', /empty parentheses/, 6],
    ['(a', /expected '\)' to close the '\(' at position 1, found end of rule/, 3],
    ['a)', /unexpected '\)'/, 2],
    ['a b', /unexpected 'b'/, 3],
    ['a = 1 2', /unexpected '2'/, 7],
    ['a = 1 "x"', /unexpected '"x"'/, 7],
    ['a = 1 #', /unexpected character '#'/, 7],
    ['a = 1.', /digit after the decimal point/, 7],
    ['a = 1.2.3', /malformed number/, 5],
    ['a = 12abc', /malformed number/, 5],
    ['a = - 1', /unexpected character '-'/, 5],
    ['a = 1e5', /malformed number/, 5],
    [`a = ${'9'.repeat(400)}`, /number out of range/, 5],
  ];
  for (const [rule, message, position] of cases) {
    it(`${JSON.stringify(rule.length > 40 ? rule.slice(0, 40) + '…' : rule)}`, () => {
      const err = syntaxError(rule);
      expect(err.message).toMatch(message);
      expect(err.position).toBe(position);
      expect(err.message).toContain(`at position ${position}`);
    });
  }

  it('longer than 1024 characters', () => {
    const ok = 'a = "' + 'x'.repeat(1024 - 6) + '"';
    expect(Array.from(ok)).toHaveLength(1024);
    expect(parseRule(ok).kind).toBe('expr');
    const err = syntaxError(ok + ' ');
    expect(err.message).toMatch(/longer than 1024 characters/);
    expect(err.position).toBe(1025);
  });

  it('length counts characters, not UTF-16 units', () => {
    const ok = 'a = "' + '😀'.repeat(1024 - 6) + '"';
    expect(ok.length).toBeGreaterThan(1024);
    expect(parseRule(ok).kind).toBe('expr');
  });

  it('positions count characters', () => {
    expect(syntaxError('"😀😀" = #').position).toBe(8);
  });

  it('deeper than 32 levels', () => {
    const parens = (n: number) => '('.repeat(n) + 'a' + ')'.repeat(n);
    expect(parseRule(parens(32)).kind).toBe('expr');
    expect(syntaxError(parens(33)).message).toMatch(/deeper than 32/);
    expect(syntaxError(parens(33)).position).toBe(33);
    expect(parseRule('!'.repeat(32) + 'a').kind).toBe('expr');
    expect(syntaxError('!'.repeat(33) + 'a').message).toMatch(/deeper than 32/);
    expect(parseRule('!('.repeat(16) + 'a' + ')'.repeat(16)).kind).toBe('expr');
    expect(syntaxError('!('.repeat(16) + '!a' + ')'.repeat(16)).message).toMatch(/deeper than 32/);
    // Long chains of && / || are flat, not deep.
    expect(parseRule(Array(300).fill('a').join('&&')).kind).toBe('expr');
  });

  it('a non-string rule is refused', () => {
    expect(() => parseRule(5 as unknown as Rule)).toThrow(RuleSyntaxError);
  });
});

describe('validateRules and compileRules', () => {
  const allNull = { list: null, view: null, create: null, update: null, delete: null };

  it('omitted rules object: every rule null', () => {
    expect(validateRules(undefined)).toEqual(allNull);
    expect(RULE_ACTIONS).toEqual(['list', 'view', 'create', 'update', 'delete']);
  });

  it('keeps given rules, nulls the omitted ones', () => {
    expect(validateRules({ list: 'public', view: '', create: 'users', update: 'owner = @auth.id' })).toEqual({
      list: 'public',
      view: '',
      create: 'users',
      update: 'owner = @auth.id',
      delete: null,
    });
    expect(validateRules({})).toEqual(allNull);
    expect(validateRules({ list: undefined, view: null })).toEqual(allNull);
  });

  it('refuses wrong shapes with clear messages', () => {
    const msg = (v: unknown) => {
      try {
        validateRules(v);
      } catch (err) {
        expect(err).toBeInstanceOf(RuleSyntaxError);
        return (err as Error).message;
      }
      throw new Error('expected an error');
    };
    expect(msg(null)).toMatch(/rules must be an object/);
    expect(msg('public')).toMatch(/rules must be an object/);
    expect(msg(['public'])).toMatch(/rules must be an object/);
    expect(msg({ read: 'public' })).toMatch(/rules\.read is not a rule/);
    expect(msg({ list: 1 })).toMatch(/rules\.list must be null or a string/);
    expect(msg({ delete: true })).toMatch(/rules\.delete must be null or a string/);
    expect(msg({ view: { a: 1 } })).toMatch(/rules\.view must be null or a string/);
  });

  it('parses every expression so syntax errors surface at save time', () => {
    try {
      validateRules({ list: 'public', update: 'owner = "x' });
      throw new Error('expected an error');
    } catch (err) {
      expect(err).toBeInstanceOf(RuleSyntaxError);
      const e = err as RuleSyntaxError;
      expect(e.message).toBe('rules.update: unterminated string at position 9');
      expect(e.action).toBe('update');
      expect(e.position).toBe(9);
    }
  });

  it('compileRules compiles all five and survives JSON storage', () => {
    const rules = validateRules({
      list: 'status = "published" || owner = @auth.id',
      view: 'public',
      create: '@request.owner = @auth.id',
      update: 'users',
    });
    const compiled = compileRules(rules);
    expect(compiled.view).toEqual({ kind: 'public' });
    expect(compiled.update).toEqual({ kind: 'users' });
    expect(compiled.delete).toEqual({ kind: 'nobody' });
    const stored = JSON.parse(JSON.stringify(compiled)) as typeof compiled;
    expect(stored).toEqual(compiled);
    expect(evaluateRule(stored.list, { principal: pub, record: { status: 'published' }, request: null })).toBe(true);
    expect(evaluateRule(stored.create, { principal: user, record: null, request: { owner: 'user_1' } })).toBe(true);
    expect(evaluateRule(stored.delete, { principal: user, record: {}, request: null })).toBe(false);
    expect(evaluateRule(stored.delete, { principal: oauth, record: {}, request: null })).toBe(true);
  });

  it('compileRules names the action of a bad rule', () => {
    expect(() => compileRules({ list: null, view: null, create: '(', update: null, delete: null })).toThrow(
      /^rules\.create: /,
    );
  });
});

describe('referencedFields', () => {
  it('lists bare identifiers and @request fields, not @auth or literals', () => {
    expect(referencedFields(parseRule('status = "published" || owner = @auth.id && !(@request.owner != @auth.role) || z'))).toEqual([
      'owner',
      'status',
      'z',
    ]);
    expect(referencedFields(parseRule('@request.title && b < 1 && !c'))).toEqual(['b', 'c', 'title']);
    expect(referencedFields(parseRule('true'))).toEqual([]);
    for (const r of [null, '', 'public', 'users'] as Rule[]) expect(referencedFields(parseRule(r))).toEqual([]);
  });
});
