/**
 * Webhook destinations (lambdas/events/webhook-url.ts): every refusal code with several URLs, the
 * numeric IPv4 spellings and IPv6 forms of private addresses, DNS names resolving to private
 * addresses (an injected lookup), and public destinations let through. Every case runs with the
 * loopback setting off unless its name says otherwise.
 */
import { describe, expect, it } from 'vitest';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { checkWebhookUrl, isPublicAddress, resolveDestination, type LookupFn } from '../../lambdas/events/webhook-url.js';

const OFF = { allowLoopback: false };
const ON = { allowLoopback: true };

/** The code checkWebhookUrl refuses `raw` with (fails when it is accepted). */
function refusal(raw: string, options = OFF): string {
  try {
    const url = checkWebhookUrl(raw, options);
    return `accepted as ${url.href}`;
  } catch (error) {
    expect(error).toBeInstanceOf(PlatformError);
    expect((error as PlatformError).status).toBe(400);
    expect((error as PlatformError).param).toBe('delivery.url');
    return (error as PlatformError).code;
  }
}

/** A lookup answering `answers` for every name, counting its calls. */
function fakeLookup(...answers: string[][]): LookupFn & { calls: string[] } {
  const calls: string[] = [];
  const fn = async (name: string) => {
    calls.push(name);
    const list = answers[Math.min(calls.length - 1, answers.length - 1)];
    return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(fn, { calls });
}

async function resolveRefusal(raw: string, lookup: LookupFn, allowLoopback = false): Promise<string> {
  const url = checkWebhookUrl(raw, { allowLoopback });
  try {
    const d = await resolveDestination(url, { allowLoopback, lookup });
    return `resolved to ${d.address}`;
  } catch (error) {
    expect(error).toBeInstanceOf(PlatformError);
    return (error as PlatformError).code;
  }
}

describe('checkWebhookUrl', () => {
  it('accepts public https URLs on 443 and returns them parsed', () => {
    for (const raw of [
      'https://hooks.example.com/webhook',
      'https://hooks.example.com:443/webhook?tenant=a&x=1',
      'https://HOOKS.Example.COM/path/with%20space',
      'https://api.xn--caf-dma.fr/',
      'https://8.8.8.8/hook',
      'https://[2606:4700:4700::1111]/hook',
      'https://hooks.example.com./trailing-dot',
    ]) {
      const url = checkWebhookUrl(raw, OFF);
      expect(url).toBeInstanceOf(URL);
      expect(url.protocol).toBe('https:');
      expect(url.port).toBe('');
    }
    expect(checkWebhookUrl('https://HOOKS.example.com:443/a', OFF).href).toBe('https://hooks.example.com/a');
  });

  it.each([
    'not a url',
    'hooks.example.com/webhook',
    '//hooks.example.com/',
    'https://',
    'https://exa mple.com/',
    'https://example.com/\u0000',
    ' https://example.com/',
    'https://exa\nmple.com/',
    'https://exa\tmple.com/',
    'https://café.fr/',
    'https://exa\u200bmple.com/',
    'https://１２７.0.0.1/',
    'https://example.com/🎉',
    'https://ex_am-.com/',
    'https://-example.com/',
    'https://a..example.com/',
    `https://example.com/${'a'.repeat(2030)}`,
    `https://${'a'.repeat(64)}.example.com/`,
    'https://09.1.1.1/',
    'https://1.2.3.4.5/',
    'https://example.com/#',
    'https://example.com/#section',
    'https://example.com/path?q=1#frag',
  ])('%s is invalid_url', (raw) => {
    expect(refusal(raw)).toBe('invalid_url');
  });

  it('refuses an over-long URL (over 2048 characters) and accepts one of 2048', () => {
    const base = 'https://example.com/';
    expect(checkWebhookUrl(base + 'a'.repeat(2048 - base.length), OFF).href.length).toBe(2048);
    expect(refusal(base + 'a'.repeat(2049 - base.length))).toBe('invalid_url');
  });

  it.each([
    'http://hooks.example.com/',
    'HTTP://hooks.example.com/',
    'ftp://hooks.example.com/',
    'ws://hooks.example.com/',
    'wss://hooks.example.com/',
    'file:///etc/passwd',
    'gopher://hooks.example.com/',
    'javascript:alert(1)',
    'data:text/plain,hello',
    'mailto:ops@example.com',
  ])('%s is url_not_https', (raw) => {
    expect(refusal(raw)).toBe('url_not_https');
  });

  it.each([
    'https://user@hooks.example.com/',
    'https://user:pass@hooks.example.com/',
    'https://:pass@hooks.example.com/',
    'https://@hooks.example.com/',
    'https://user%40x:p@hooks.example.com/',
    'https://hooks.example.com@127.0.0.1/',
  ])('%s is url_has_credentials', (raw) => {
    expect(refusal(raw)).toBe('url_has_credentials');
  });

  it.each([
    'https://hooks.example.com:8443/',
    'https://hooks.example.com:80/',
    'https://hooks.example.com:1/',
    'https://hooks.example.com:65535/',
    'https://8.8.8.8:22/',
  ])('%s is url_port_not_allowed', (raw) => {
    expect(refusal(raw)).toBe('url_port_not_allowed');
  });

  it('takes an explicit :443 (and its zero-padded spelling) as the default port', () => {
    expect(checkWebhookUrl('https://hooks.example.com:443/', OFF).port).toBe('');
    expect(checkWebhookUrl('https://hooks.example.com:0443/', OFF).port).toBe('');
  });

  it.each([
    // loopback, private, link-local (cloud metadata), CGNAT, 0/8, broadcast, multicast, reserved, documentation, benchmarking
    'https://127.0.0.1/',
    'https://127.255.255.254/',
    'https://10.0.0.1/',
    'https://172.16.0.1/',
    'https://172.31.255.255/',
    'https://192.168.1.1/',
    'https://169.254.169.254/latest/meta-data/',
    'https://100.64.0.1/',
    'https://100.127.255.255/',
    'https://0.0.0.0/',
    'https://0.1.2.3/',
    'https://255.255.255.255/',
    'https://224.0.0.1/',
    'https://239.255.255.250/',
    'https://240.0.0.1/',
    'https://192.0.0.8/',
    'https://192.0.2.1/',
    'https://198.51.100.7/',
    'https://203.0.113.9/',
    'https://198.18.0.1/',
    'https://198.19.255.255/',
  ])('%s is url_destination_blocked', (raw) => {
    expect(refusal(raw)).toBe('url_destination_blocked');
  });

  it.each([
    ['decimal', 'https://2130706433/'],
    ['octal', 'https://0177.0.0.1/'],
    ['octal, every part', 'https://0177.0000.0000.0001/'],
    ['hex', 'https://0x7f.1/'],
    ['hex, whole', 'https://0x7f000001/'],
    ['hex, dotted', 'https://0x7f.0x0.0x0.0x1/'],
    ['short', 'https://127.1/'],
    ['three parts', 'https://127.0.1/'],
    ['decimal private', 'https://167772161/'], // 10.0.0.1
    ['hex metadata', 'https://0xa9fea9fe/'], // 169.254.169.254
    ['mixed', 'https://0xa9.254.0251.254/'],
    ['percent-encoded', 'https://%31%32%37.0.0.1/'],
    ['trailing dot', 'https://127.0.0.1./'],
  ])('a %s IPv4 spelling (%s) is normalized and url_destination_blocked', (_, raw) => {
    expect(refusal(raw)).toBe('url_destination_blocked');
  });

  it('sees the normalized dotted quad of every numeric spelling (WHATWG URL parsing)', () => {
    for (const raw of ['https://2130706433/', 'https://0177.0.0.1/', 'https://0x7f.1/', 'https://127.1/']) {
      expect(new URL(raw).hostname).toBe('127.0.0.1');
    }
    // …and a public address spelled so is let through as that address.
    expect(checkWebhookUrl('https://134744072/', OFF).hostname).toBe('8.8.8.8');
  });

  it.each([
    'https://[::1]/',
    'https://[::]/',
    'https://[0:0:0:0:0:0:0:1]/',
    'https://[::ffff:127.0.0.1]/',
    'https://[::ffff:7f00:1]/',
    'https://[::ffff:10.0.0.1]/',
    'https://[::ffff:169.254.169.254]/',
    'https://[::127.0.0.1]/', // IPv4-compatible (deprecated)
    'https://[::ffff:0:7f00:1]/', // IPv4-translated (RFC 6145)
    'https://[64:ff9b::a00:1]/', // NAT64 of 10.0.0.1
    'https://[64:ff9b::7f00:1]/',
    'https://[64:ff9b::808:808]/', // NAT64 of a public address: refused all the same
    'https://[64:ff9b:1::a00:1]/',
    'https://[fe80::1]/',
    'https://[febf::1]/',
    'https://[fc00::1]/',
    'https://[fd12:3456::1]/',
    'https://[fec0::1]/',
    'https://[ff02::1]/',
    'https://[2001:db8::1]/',
    'https://[2001::1]/', // Teredo
    'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
    'https://[100::1]/', // discard-only
    'https://[2002:7f00:1::1]/', // 6to4 of 127.0.0.1
    'https://[2002:a00:1::]/', // 6to4 of 10.0.0.1
    'https://[3fff::1]/',
    'https://[5f00::1]/',
  ])('%s is url_destination_blocked', (raw) => {
    expect(refusal(raw)).toBe('url_destination_blocked');
  });

  it.each([
    'https://localhost/',
    'https://LOCALHOST/',
    'https://localhost./',
    'https://api.localhost/',
    'https://printer.local/',
    'https://metadata.google.internal/computeMetadata/v1/',
    'https://ip-10-0-0-1.ec2.internal/',
    'https://service.internal/',
    'https://router.home.arpa/',
    'https://1.0.0.127.in-addr.arpa/',
    'https://db.localdomain/',
    'https://nas.lan/',
    'https://intranet/',
    'https://metadata/',
  ])('%s (a local-use name) is url_destination_blocked', (raw) => {
    expect(refusal(raw)).toBe('url_destination_blocked');
  });

  it('with the loopback setting, lets http and https to 127.0.0.1, [::1] and localhost through on any port', () => {
    for (const raw of ['http://127.0.0.1:3000/hook', 'http://[::1]:3000/hook', 'http://localhost:3000/hook', 'http://127.0.0.1/hook', 'https://localhost:8443/']) {
      expect(checkWebhookUrl(raw, ON).href).toBe(new URL(raw).href);
    }
  });

  it('with the loopback setting, still refuses everything else', () => {
    expect(refusal('http://127.0.0.2:3000/', ON)).toBe('url_not_https');
    expect(refusal('https://127.0.0.2:3000/', ON)).toBe('url_port_not_allowed');
    expect(refusal('https://127.0.0.2/', ON)).toBe('url_destination_blocked');
    expect(refusal('https://2130706434/', ON)).toBe('url_destination_blocked'); // 127.0.0.2
    expect(checkWebhookUrl('https://2130706433/', ON).hostname).toBe('127.0.0.1'); // the parser's 127.0.0.1 is 127.0.0.1
    expect(refusal('https://[::ffff:127.0.0.1]/', ON)).toBe('url_destination_blocked');
    expect(refusal('http://10.0.0.1:3000/', ON)).toBe('url_not_https');
    expect(refusal('https://10.0.0.1/', ON)).toBe('url_destination_blocked');
    expect(refusal('http://hooks.example.com/', ON)).toBe('url_not_https');
    expect(refusal('https://api.localhost/', ON)).toBe('url_destination_blocked');
    expect(refusal('http://user:p@127.0.0.1:3000/', ON)).toBe('url_has_credentials');
    expect(refusal('http://127.0.0.1:3000/#x', ON)).toBe('invalid_url');
    expect(refusal('ftp://127.0.0.1:3000/', ON)).toBe('url_not_https');
  });

  it('without the loopback setting, refuses the loopback development URLs', () => {
    expect(refusal('http://127.0.0.1:3000/hook')).toBe('url_not_https');
    expect(refusal('https://127.0.0.1:3000/hook')).toBe('url_port_not_allowed');
    expect(refusal('https://[::1]/hook')).toBe('url_destination_blocked');
    expect(refusal('https://localhost/hook')).toBe('url_destination_blocked');
  });
});

describe('isPublicAddress', () => {
  it.each(['8.8.8.8', '1.1.1.1', '93.184.215.14', '100.63.255.255', '100.128.0.0', '172.15.255.255', '172.32.0.0', '192.169.0.1', '198.17.255.255', '198.20.0.0', '223.255.255.255', '2606:4700:4700::1111', '2a00:1450:4007:80e::200e', '::ffff:8.8.8.8', '::FFFF:8.8.8.8', '2002:808:808::1'])(
    '%s is public',
    (ip) => {
      expect(isPublicAddress(ip)).toBe(true);
    },
  );

  it.each([
    '0.0.0.0', '0.255.255.255', '10.0.0.1', '10.255.255.255', '100.64.0.0', '100.127.255.255', '127.0.0.1', '127.1.2.3', '169.254.0.1',
    '172.16.0.0', '172.31.255.255', '192.0.0.1', '192.0.2.1', '192.88.99.1', '192.168.0.1', '198.18.0.0', '198.19.255.255', '198.51.100.1', '203.0.113.1',
    '224.0.0.1', '239.255.255.255', '240.0.0.1', '255.255.255.255',
    '::', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:a9fe:a9fe', '::ffff:0:8.8.8.8', '::8.8.8.8', '::127.0.0.1', '::0.0.0.1',
    '64:ff9b::a00:1', '64:ff9b::808:808', '64:ff9b:1::1', '2001::1', '2001:db8::1', '2001:2::1', '2001:10::1', '2002:a00:1::1', '2002:7f00:1::1',
    '100::1', 'fc00::1', 'fdff::1', 'fe80::1', 'fe80::1%eth0', 'fec0::1', 'ff02::1', '3fff::1', '5f00::1', '4000::1', '1000::1',
  ])('%s is not public', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  it('reads the spellings an address may come in, and refuses text that is no address', () => {
    expect(isPublicAddress('127.1')).toBe(false);
    expect(isPublicAddress('0x7f.1')).toBe(false);
    expect(isPublicAddress('2130706433')).toBe(false);
    for (const junk of ['', 'example.com', '1.2.3.4.5', '::g', '[::1]', '8.8.8.8 ']) expect(isPublicAddress(junk)).toBe(false);
  });
});

describe('resolveDestination', () => {
  it('returns the first address of a name whose every address is public', async () => {
    const lookup = fakeLookup(['8.8.8.8', '2606:4700:4700::1111']);
    const url = checkWebhookUrl('https://hooks.example.com/', OFF);
    expect(await resolveDestination(url, { allowLoopback: false, lookup })).toEqual({ address: '8.8.8.8', family: 4 });
    expect(lookup.calls).toEqual(['hooks.example.com']);
    expect(await resolveDestination(url, { allowLoopback: false, lookup: fakeLookup(['2606:4700:4700::1111']) })).toEqual({ address: '2606:4700:4700::1111', family: 6 });
  });

  it.each([
    ['127.0.0.1'],
    ['10.1.2.3'],
    ['172.20.0.5'],
    ['192.168.0.10'],
    ['169.254.169.254'],
    ['100.100.100.200'],
    ['0.0.0.0'],
    ['::1'],
    ['::ffff:127.0.0.1'],
    ['::ffff:10.0.0.1'],
    ['fd00:ec2::254'],
    ['fe80::1'],
    ['64:ff9b::a00:1'],
    ['2001:db8::5'],
  ])('a name resolving to %s is url_destination_blocked', async (address) => {
    expect(await resolveRefusal('https://rebind.example.com/', fakeLookup([address]))).toBe('url_destination_blocked');
  });

  it('refuses a name with one public and one private address, whichever comes first', async () => {
    expect(await resolveRefusal('https://mixed.example.com/', fakeLookup(['8.8.8.8', '10.0.0.1']))).toBe('url_destination_blocked');
    expect(await resolveRefusal('https://mixed.example.com/', fakeLookup(['192.168.1.1', '8.8.8.8']))).toBe('url_destination_blocked');
    expect(await resolveRefusal('https://mixed.example.com/', fakeLookup(['2606:4700::1', 'fc00::1']))).toBe('url_destination_blocked');
  });

  it('refuses an answer that is no address', async () => {
    expect(await resolveRefusal('https://odd.example.com/', fakeLookup(['not-an-ip']))).toBe('url_destination_blocked');
  });

  it('lets a literal address through without DNS, an IPv4-mapped one as IPv4', async () => {
    const lookup = fakeLookup(['10.0.0.1']);
    expect(await resolveDestination(checkWebhookUrl('https://8.8.8.8/', OFF), { allowLoopback: false, lookup })).toEqual({ address: '8.8.8.8', family: 4 });
    expect(await resolveDestination(checkWebhookUrl('https://[2606:4700::1111]/', OFF), { allowLoopback: false, lookup })).toEqual({ address: '2606:4700::1111', family: 6 });
    expect(await resolveDestination(checkWebhookUrl('https://[::ffff:8.8.8.8]/', OFF), { allowLoopback: false, lookup })).toEqual({ address: '8.8.8.8', family: 4 });
    expect(lookup.calls).toEqual([]);
  });

  it('refuses a literal private address even when the URL was not checked first', async () => {
    for (const raw of ['https://10.0.0.1/', 'https://[::1]/', 'https://[::ffff:7f00:1]/', 'http://127.0.0.1:3000/']) {
      await expect(resolveDestination(new URL(raw), { allowLoopback: false, lookup: fakeLookup(['8.8.8.8']) })).rejects.toMatchObject({ code: 'url_destination_blocked' });
    }
  });

  it('with the loopback setting, lets loopback addresses through, and nothing else private', async () => {
    expect(await resolveRefusal('http://localhost:3000/', fakeLookup(['127.0.0.1', '::1']), true)).toBe('resolved to 127.0.0.1');
    expect(await resolveRefusal('http://127.0.0.1:3000/', fakeLookup([]), true)).toBe('resolved to 127.0.0.1');
    expect(await resolveRefusal('http://[::1]:3000/', fakeLookup([]), true)).toBe('resolved to ::1');
    expect(await resolveRefusal('http://localhost:3000/', fakeLookup(['127.0.0.1', '10.0.0.1']), true)).toBe('url_destination_blocked');
    expect(await resolveRefusal('https://hooks.example.com/', fakeLookup(['192.168.0.1']), true)).toBe('url_destination_blocked');
  });

  it('passes the resolver error on when the name does not resolve, and treats no answer as none', async () => {
    const failing: LookupFn = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.example.com'), { code: 'ENOTFOUND' });
    };
    const url = checkWebhookUrl('https://nowhere.example.com/', OFF);
    await expect(resolveDestination(url, { allowLoopback: false, lookup: failing })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(resolveDestination(url, { allowLoopback: false, lookup: fakeLookup([]) })).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('asks the lookup for every address, in the resolver\'s order', async () => {
    let seen: unknown;
    const lookup: LookupFn = async (_name, options) => {
      seen = options;
      return [{ address: '8.8.8.8', family: 4 }];
    };
    await resolveDestination(checkWebhookUrl('https://hooks.example.com/', OFF), { allowLoopback: false, lookup });
    expect(seen).toEqual({ all: true, verbatim: true });
  });
});
