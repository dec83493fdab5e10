// Where webhooks (and, next, media downloads) may go: `https://` to public addresses only (unless
// the operator allows private URLs). A host name is resolved and EVERY address checked; the request
// then connects to the address that was checked (pinned: `pinTo` of ./http.ts), so a DNS answer
// that changes in between (rebinding) cannot send it elsewhere. Webhook URLs are checked when an
// endpoint is saved and again before each attempt.
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { PinnedAddress } from './http.js';

/** Why a URL is refused, in words for the integrator. */
export class RefusedUrlError extends Error {}

// The special-purpose ranges come from ipaddr.js (`range()`: private, loopback, linkLocal,
// carrierGradeNat, uniqueLocal, multicast, unspecified, broadcast, reserved (documentation,
// benchmarking, 6to4 relay, 240/4), ipv4Mapped, rfc6145, rfc6052, 6to4, teredo, benchmarking, amt,
// as112, orchid, segmentRouting, ...): whatever it does not call unicast is refused. One rule is
// ours: IPv6 outside 2000::/3 is not allocated for global unicast, which ipaddr.js still calls unicast.
const V6_GLOBAL = ipaddr.IPv6.parseCIDR('2000::/3');

/**
 * True when `address` (an IP literal) is a public unicast address. Everything else is refused:
 * private, loopback, link-local, CGNAT, unique-local (fc00::/7, so also fd00:ec2::254), multicast,
 * IPv4-mapped and -translated IPv6 (::ffff:0:0/96, 64:ff9b::/96, outside 2000::/3), 6to4 and
 * Teredo, and the documentation and benchmarking ranges.
 */
export function isPublicAddress(address: string): boolean {
  try {
    switch (net.isIP(address)) {
      case 4: {
        const v4 = ipaddr.IPv4.parse(address);
        return v4.range() === 'unicast';
      }
      case 6: {
        const v6 = ipaddr.IPv6.parse(address);
        return v6.range() === 'unicast' && v6.match(V6_GLOBAL);
      }
      default:
        return false;
    }
  } catch {
    // A form node takes but ipaddr.js cannot read (an unusual zone id): not provably public.
    return false;
  }
}

/** A URL whose host was checked; `address` (pinned for the request: `pinTo`) is the one to connect to. */
export interface CheckedTarget extends PinnedAddress {
  url: URL;
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
  const literal = (allowPrivate ? literalsAllowingPrivate : literals).get(text);
  if (literal) return literal;
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
  const checked: CheckedTarget = { url, address: first.address, family: first.family === 6 ? 6 : 4 };
  // An IP literal's answer depends on the text alone: kept (a name is resolved and checked every time).
  if (net.isIP(host)) {
    const known = allowPrivate ? literalsAllowingPrivate : literals;
    if (known.size >= MAX_LITERALS) known.clear();
    known.set(text, checked);
  }
  return checked;
}

/** URLs whose host is an IP literal, checked already (each attempt of a webhook checks its URL again). */
const literals = new Map<string, CheckedTarget>();
const literalsAllowingPrivate = new Map<string, CheckedTarget>();
const MAX_LITERALS = 1_000;
