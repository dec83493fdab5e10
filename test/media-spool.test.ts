// The spool's sweep: parts nobody wrote for an hour (a killed process's) are removed, at start-up and
// again every hour after, so a process killed after its siblings started does not leave its part
// until the next start; newer parts (a live sibling's) stay. And a stream cut before the spool
// listens to it ends the spool too, instead of leaving it waiting for events that already went.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { CutShortError, spool, sweepSpoolEvery } from '../src/media/spool.js';
import { httpGetStream } from '../src/outbound/http.js';
import { closeServer, listenOnLoopback, LogCapture, waitFor } from './helpers/processes.js';

let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sf-spool-'));
});
afterAll(() => fs.rm(dir, { recursive: true, force: true }));

describe('the spool sweep of a running process', () => {
  it('when a part is left by a process killed after this one started, then a later sweep removes it and keeps a live one', async () => {
    const logs = new LogCapture();
    const stop = sweepSpoolEvery(dir, createLogger('info', logs.destination), { everyMs: 50 });
    try {
      // Left after the start-up sweep: an abandoned part (unwritten for two hours) and a live one.
      const abandoned = path.join(dir, 'abandoned.part');
      const live = path.join(dir, 'live.part');
      await fs.writeFile(abandoned, 'half a file');
      const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
      await fs.utimes(abandoned, twoHoursAgo, twoHoursAgo);
      await fs.writeFile(live, 'being written');

      await waitFor('the abandoned part to go', async () => !(await fs.readdir(dir)).includes('abandoned.part'));

      expect(await fs.readdir(dir)).toEqual(['live.part']);
      await waitFor('the warning', async () => logs.lines.some((line) => line.msg === 'abandoned spool files removed'));
      expect(logs.lines.find((line) => line.msg === 'abandoned spool files removed')).toMatchObject({ level: 40, spoolDir: dir, files: 1 });
    } finally {
      await stop();
    }
  });
});

describe('a download spooled', () => {
  it('when its answer is cut before the spool listens (the idle limit, while the spool directory is made on a busy thread pool), then the spool fails at once and leaves no part', async () => {
    // A host that sends its headers and then nothing: the download's idle limit destroys the answer.
    const { server, origin } = await listenOnLoopback(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': 1_000 });
      res.flushHeaders();
    });
    try {
      const answer = await httpGetStream(`${origin}/photo.jpg`, { timeoutMs: 1_000 });
      if ('failure' in answer) throw new Error(`no answer: ${answer.message}`);
      await waitFor('the idle limit to cut the answer', () => answer.body.destroyed);
      const parts = path.join(dir, 'cut');

      const outcome = await Promise.race([
        spool(answer.body, parts, 1_000_000).then(
          () => 'spooled',
          (err: unknown) => err,
        ),
        new Promise((resolve) => setTimeout(() => resolve('still waiting after 2 s'), 2_000)),
      ]);

      expect(outcome).toBeInstanceOf(CutShortError);
      expect((outcome as CutShortError).message).toMatch(/paused for more than 1000 ms/);
      expect(await fs.readdir(parts)).toEqual([]);
    } finally {
      await closeServer(server);
    }
  });
});
