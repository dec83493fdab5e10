// Where webhooks may go: `https://` to public addresses only (unless the operator allows private
// URLs). A host name is resolved and EVERY address checked; the request then connects to the
// address that was checked (pinned), so a DNS answer that changes in between (rebinding) cannot
// send it elsewhere. Checked when an endpoint is saved and again before each attempt.
import { lookup } from 'node:dns/promises';
import net from 'node:net';

/** Why a URL is refused, in words for the integrator. */
export class RefusedUrlError extends Error {}

/** Global unicast IPv6 is 2000::/3; within it these are special-purpose, not the public internet. */
const V6_PUBLIC = new net.BlockList();
V6_PUBLIC.addSubnet('2000::', 3, 'ipv6');
const V6_SPECIAL = new net.BlockList();
for (const [prefix, bits] of [
  ['2001::', 23], // IETF protocol assignments: Teredo 2001::/32, benchmarking, ORCHID...
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: embeds an IPv4 address
  ['3fff::', 20], // documentation
] as const) {
  V6_SPECIAL.addSubnet(prefix, bits, 'ipv6');
}

/** IPv4 ranges that are not the public internet (RFC 6890 and friends). */
const V4_SPECIAL = new net.BlockList();
for (const [prefix, bits] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  V4_SPECIAL.addSubnet(prefix, bits, 'ipv4');
}

/**
 * True when `address` (an IP literal) is a public unicast address. Everything else is refused:
 * private, loopback, link-local, CGNAT, unique-local (fc00::/7, so also fd00:ec2::254), multicast,
 * IPv4-mapped and -translated IPv6 (::ffff:0:0/96, 64:ff9b::/96, outside 2000::/3), and the
 * documentation and benchmarking ranges.
 */
export function isPublicAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return !V4_SPECIAL.check(address, 'ipv4');
  if (family === 6) return V6_PUBLIC.check(address, 'ipv6') && !V6_SPECIAL.check(address, 'ipv6');
  return false;
}

export interface CheckedTarget {
  url: URL;
  /** The address to connect to: checked, and pinned for the request. */
  address: string;
  family: 4 | 6;
}

/** A bare host: [::1] -> ::1. */
const bareHost = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

/** The URL parsed, or why it is refused before any name is resolved. */
export function checkUrlShape(text: string, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new RefusedUrlError('is not a URL');
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    throw new RefusedUrlError(allowPrivate ? 'must start with https:// or http://' : 'must start with https://');
  }
  if (url.username || url.password) throw new RefusedUrlError('must not carry a user name or password');
  if (!url.hostname) throw new RefusedUrlError('has no host');
  return url;
}

/**
 * Resolves the URL's host and checks every address it has; the first one is the request's target.
 * With `allowPrivate`, any address goes. Throws RefusedUrlError saying why.
 */
export async function resolveTarget(text: string, allowPrivate: boolean): Promise<CheckedTarget> {
  const url = checkUrlShape(text, allowPrivate);
  const host = bareHost(url);
  let addresses: Array<{ address: string; family: number }>;
  if (net.isIP(host)) {
    addresses = [{ address: host, family: net.isIP(host) }];
  } else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch (err) {
      throw new RefusedUrlError(`host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    if (addresses.length === 0) throw new RefusedUrlError(`host ${host} does not resolve`);
  }
  if (!allowPrivate) {
    const refused = addresses.find((a) => !isPublicAddress(a.address));
    if (refused) {
      throw new RefusedUrlError(
        refused.address === host ? `${host} is not a public address` : `host ${host} resolves to ${refused.address}, which is not a public address`,
      );
    }
  }
  const first = addresses[0]!;
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}
