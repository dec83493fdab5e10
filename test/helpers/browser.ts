// Debian's chromium (apt-get install chromium; CI installs it) driven by playwright-core, for the tests
// that run a page in a real browser. Never `npx playwright install`: it downloads, and fails here.
import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** True when the browser is installed; otherwise says which test is skipped and why. */
export function hasChromium(what: string): boolean {
  const present = fs.existsSync(CHROMIUM);
  if (!present) console.warn(`${CHROMIUM} is missing: ${what} is SKIPPED (apt-get install chromium; CI installs it)`);
  return present;
}

/** A headless chromium with nothing running in the background (no updates, no sync, no QUIC). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-quic',
      '--no-first-run',
      '--disable-sync',
    ],
    timeout: 90_000,
  });
}
