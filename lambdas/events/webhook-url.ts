/**
 * Where a webhook may be sent (docs/events/webhook-destinations.md). A subscriber chooses the URL and
 * the platform makes the request from inside its network, so an unchecked URL would let anyone read
 * or poke the cloud's metadata service, the VPC or the host itself (SSRF). The rules, in order:
 * the text parses as a plain https URL on 443, with no credentials and no fragment; its host is not a
 * local-use name; a literal address, and every address its name resolves to, is public unicast.
 * The URL is checked when a subscription is created and again at every delivery, and the sender
 * connects to the very address checked here (webhook-sender.ts), so a name that later resolves
 * elsewhere (DNS rebinding) is caught or never reached.
 */
import { promises as dns } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { PlatformError, type ErrorCode } from '../shared/errors.js';

/** The URL's field in a create-subscription body: the `param` of every refusal. */
const PARAM = 'delivery.url';

/** Longer URLs are refused: browsers and proxies commonly stop near 2 KB, and a URL is stored per subscription. */
export const MAX_URL_LENGTH = 2048;

/** dns.promises.lookup with `all: true`, or a stand-in (tests). */
export type LookupFn = (hostname: string, options: { all: true; verbatim: true }) => Promise<{ address: string; family: number }[]>;

export interface WebhookUrlOptions {
  /** EVENTS_ALLOW_LOOPBACK_WEBHOOKS: local development only. */
  allowLoopback: boolean;
}

const refuse = (code: ErrorCode, message: string): never => {
  throw new PlatformError(code, message, PARAM);
};

/**
 * Name suffixes that only mean something inside a network: loopback (RFC 6761), mDNS (RFC 6762),
 * cloud-internal names (GCP's metadata.google.internal, AWS's *.ec2.internal), `.arpa`
 * (home.arpa of RFC 8375, reverse-lookup names) and local search domains that are no public TLD. DNS would catch most of them too; refusing up front
 * gives a clear answer at creation and does not depend on the resolver in use.
 */
const LOCAL_SUFFIXES = ['localhost', 'local', 'internal', 'localdomain', 'arpa', 'home', 'lan', 'intranet', 'corp', 'private'];

/** The hosts the loopback setting lets through (with http or https, on any port), and nothing else. */
export const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** Printable ASCII only: the parser silently drops tabs and newlines and maps look-alike Unicode, so such text is refused rather than guessed at. */
const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;

/** A DNS label (letters, digits, hyphen; underscore as some real names carry one), at most 63 characters. */
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/**
 * Checks a webhook URL's text and returns it parsed, or throws a 400 PlatformError:
 * `invalid_url`, `url_not_https`, `url_has_credentials`, `url_port_not_allowed`,
 * `url_destination_blocked`. Names are not resolved here: resolveDestination does that.
 */
export function checkWebhookUrl(raw: string, options: WebhookUrlOptions): URL {
  if (typeof raw !== 'string' || raw.length === 0) refuse('invalid_url', 'The webhook URL is empty.');
  if (raw.length > MAX_URL_LENGTH) refuse('invalid_url', `The webhook URL is longer than ${MAX_URL_LENGTH} characters.`);
  if (!PRINTABLE_ASCII.test(raw)) {
    refuse('invalid_url', 'The webhook URL may hold only printable ASCII characters: encode spaces and non-ASCII characters, and give an international host name in its xn-- form.');
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('invalid_url', 'The webhook URL is not a valid URL.');
  }

  const loopbackDev = options.allowLoopback && LOOPBACK_HOSTS.has(url.hostname) && (url.protocol === 'http:' || url.protocol === 'https:');
  if (url.protocol !== 'https:' && !loopbackDev) refuse('url_not_https', 'The webhook URL must use https.');
  // The parser drops an empty "user@" part; any @ before the host is refused all the same.
  if (url.username !== '' || url.password !== '' || /^[a-z][a-z0-9+.-]*:[\\/]*[^\\/?#]*@/i.test(raw)) {
    refuse('url_has_credentials', 'The webhook URL may not hold a user name or password; authenticate deliveries with the signature.');
  }
  // An empty fragment ("…#") leaves hash empty but still shows in href; a literal # appears in href only as the fragment mark.
  if (url.hash !== '' || url.href.includes('#')) refuse('invalid_url', 'The webhook URL may not hold a fragment (#…).');
  if (url.hostname === '') refuse('invalid_url', 'The webhook URL has no host.');
  // Percent-encoding can lengthen the text; the stored form must fit too.
  if (url.href.length > MAX_URL_LENGTH) refuse('invalid_url', `The webhook URL is longer than ${MAX_URL_LENGTH} characters.`);
  if (loopbackDev) return url;

  // The parser leaves the port empty when it is the scheme's default, so "" is 443 here.
  if (url.port !== '') refuse('url_port_not_allowed', 'The webhook URL must use port 443.');

  checkPublicHost(url, { what: 'The webhook URL', param: PARAM });
  return url;
}

/**
 * The host rules of a URL the platform will call on someone's say-so (webhooks here; a model route's
 * or rerank profile's `base_url` set from the console, console-upstream-destinations.md): a literal
 * address must be public, a name fully qualified and no local-use name. Throws 400 `invalid_url` or
 * `url_destination_blocked` with `param`; `what` starts the messages. Names are not resolved here.
 */
export function checkPublicHost(url: URL, options: { what: string; param: string }): void {
  const { what, param } = options;
  const no = (code: ErrorCode, message: string): never => {
    throw new PlatformError(code, message, param);
  };
  const host = url.hostname;
  if (host.startsWith('[')) {
    // IPv6 literal: the parser has already normalized it (an IPv4-mapped form becomes hex).
    if (!isPublicAddress(host.slice(1, -1))) no('url_destination_blocked', `${what} names a private, local or reserved address.`);
    return;
  }
  // The parser turns every numeric IPv4 spelling (decimal 2130706433, octal 0177.0.0.1, hex 0x7f.1,
  // short 127.1) into a dotted quad, and refuses a host whose last label is a number it cannot read;
  // ipaddr's own parser is asked as well, so nothing numeric is taken for a name.
  if (/^[0-9.]+$/.test(host) || ipaddr.isValid(host)) {
    if (!isPublicAddress(host)) no('url_destination_blocked', `${what} names a private, local or reserved address.`);
    return;
  }
  const name = host.replace(/\.$/, '');
  const labels = name.split('.');
  if (name.length > 253 || !labels.every((l) => LABEL.test(l))) no('invalid_url', `${what}'s host is not a valid host name.`);
  // A single label would be completed by the resolver's search domains: an internal name.
  if (labels.length < 2) no('url_destination_blocked', `${what}'s host must be a fully qualified public name.`);
  if (LOCAL_SUFFIXES.some((s) => name === s || name.endsWith(`.${s}`))) {
    no('url_destination_blocked', `${what} names a local or internal host.`);
  }
}

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** The IPv4 address 6to4 (2002::/16) embeds in bits 16 to 47. */
const sixToFourEmbedded = (a: ipaddr.IPv6) =>
  new ipaddr.IPv4([a.parts[1] >> 8, a.parts[1] & 0xff, a.parts[2] >> 8, a.parts[2] & 0xff]);

function isPublic(a: Address): boolean {
  // ipaddr's `unicast` is what no special range claims: private, loopback, link-local, CGNAT,
  // multicast, broadcast, 0/8, 240/4, documentation, benchmarking, 6to4 relay and AS112 are all named.
  if (a.kind() === 'ipv4') return a.range() === 'unicast';
  const v6 = a as ipaddr.IPv6;
  if (v6.zoneId) return false; // a scoped address is bound to a local link
  const range: string = v6.range();
  if (range === 'ipv4Mapped') return isPublic(v6.toIPv4Address());
  if (range === '6to4') return isPublic(sixToFourEmbedded(v6));
  // Global unicast is 2000::/3; anything else ipaddr calls unicast (old IPv4-compatible ::a.b.c.d,
  // unassigned space) is not clearly public. NAT64 (rfc6052), Teredo, discard, ULA, link-local,
  // site-local, documentation and the rest have their own range names and are refused.
  return range === 'unicast' && (v6.parts[0] & 0xe000) === 0x2000;
}

/**
 * Whether a webhook may connect to this address: IPv4 public unicast, IPv6 global unicast, or an
 * IPv4-mapped / 6to4 form whose embedded IPv4 is. NAT64 prefixes are refused whatever they embed:
 * the gateway's own network decides where they lead. Text that is not an address is not public.
 */
export function isPublicAddress(ip: string): boolean {
  const a = parseAddress(ip);
  return a !== undefined && isPublic(a);
}

/**
 * ipaddr's reading of an address, or undefined. An IPv6 text ending in a dotted quad is first
 * rewritten in hex: ipaddr reads `::a.b.c.d` (IPv4-compatible) as IPv4-mapped, not as what it is.
 */
function parseAddress(ip: string): Address | undefined {
  const text = ip.includes(':')
    ? ip.replace(/(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/, (quad, a: string, b: string, c: string, d: string) => {
        const n = [a, b, c, d].map(Number);
        if (n.some((x) => x > 255)) return quad; // left for ipaddr to refuse
        return `${((n[0] << 8) | n[1]).toString(16)}:${((n[2] << 8) | n[3]).toString(16)}`;
      })
    : ip;
  try {
    return ipaddr.parse(text);
  } catch {
    return undefined;
  }
}

function isLoopback(a: Address): boolean {
  if (a.kind() === 'ipv4') return a.range() === 'loopback';
  const v6 = a as ipaddr.IPv6;
  if (v6.range() === 'ipv4Mapped') return isLoopback(v6.toIPv4Address());
  return v6.range() === 'loopback';
}

/** An address as the socket should be given it: an IPv4-mapped one as plain IPv4. */
function destination(a: Address): { address: string; family: 4 | 6 } {
  if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()) return { address: (a as ipaddr.IPv6).toIPv4Address().toString(), family: 4 };
  return { address: a.toString(), family: a.kind() === 'ipv4' ? 4 : 6 };
}

const blocked = (): never =>
  refuse('url_destination_blocked', 'The webhook URL\'s host resolves to a private, local or reserved address.');

/**
 * The address to connect to for a checked URL: a literal IP as is, a name through DNS (every
 * address it resolves to must be allowed, not just the first, or a round-robin answer could slip a
 * private one in). Throws `url_destination_blocked`, or the resolver's own error when the name
 * does not resolve (the sender counts that as `webhook_network`).
 */
export async function resolveDestination(
  url: URL,
  options: { allowLoopback: boolean; lookup?: LookupFn },
): Promise<{ address: string; family: 4 | 6 }> {
  const allowed = (a: Address) => isPublic(a) || (options.allowLoopback && isLoopback(a));
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const literal = ipaddr.isValid(host) ? parseAddress(host) : undefined;
  if (literal) return allowed(literal) ? destination(literal) : blocked();
  const lookup: LookupFn = options.lookup ?? ((name, opts) => dns.lookup(name, opts));
  const answers = await lookup(host, { all: true, verbatim: true });
  if (answers.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' });
  const parsed = answers.map(({ address }) => parseAddress(address));
  if (!parsed.every((a): a is Address => a !== undefined && allowed(a))) return blocked();
  return destination(parsed[0]!);
}
