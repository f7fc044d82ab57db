import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { memberText } from '../../lambdas/shared/json-member.js';

describe('memberText: a top-level member of a JSON object as sent', () => {
  it('gives the value text as sent: big integers, 1e400, -0, escapes and spacing kept', () => {
    const text = '{ "model" : "run", "input" :\n {"id": 9007199254740993, "big": 1e400, "z": -0, "s": "a\\"}\\\\", "l": [1, {"x": "]"}]} , "t": true }';
    expect(memberText(text, 'input')).toBe('{"id": 9007199254740993, "big": 1e400, "z": -0, "s": "a\\"}\\\\", "l": [1, {"x": "]"}]}');
    expect(memberText(text, 'model')).toBe('"run"');
    expect(memberText(text, 't')).toBe('true');
    expect(memberText(text, 'missing')).toBeUndefined();
    expect(memberText('[1]', 'input')).toBeUndefined();
    expect(memberText('{}', 'input')).toBeUndefined();
  });

  it('takes the last of repeated names, escaped names included, as JSON.parse does', () => {
    const text = '{"input":{"a":1},"\\u0069nput":{"b":2},"other":3}';
    expect(JSON.parse(memberText(text, 'input')!)).toEqual(JSON.parse(text).input);
    expect(memberText('{"input":1,"input":[2, 3]}', 'input')).toBe('[2, 3]');
  });

  it('parses to what JSON.parse gives for the member, on any JSON object, compact or indented', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue(), fc.boolean(), (rest, input, indent) => {
        const body = { ...rest, input };
        const text = JSON.stringify(body, null, indent ? 2 : undefined);
        const parsed = JSON.parse(text);
        expect(JSON.parse(memberText(text, 'input')!)).toEqual(parsed.input);
        for (const key of Object.keys(parsed)) expect(JSON.parse(memberText(text, key)!)).toEqual(parsed[key]);
      }),
      { numRuns: 300 },
    );
  });
});
