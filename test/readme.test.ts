// The README's examples as a reader pastes them: every ```sh readme-run block, in order, in one bash
// (set -euo pipefail), in a scratch directory standing for the repository's, against a fresh
// `npm start` (the embedded database, a port of its own); a block that fails fails here. Then what
// the walk-through promises is read back through the API. test/readme-checks.test.ts checks the
// blocks' marks and the configuration table.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/processes.js';
import { README, ROOT, shellBlocks } from './helpers/readme.js';

/** The origin the README's examples call; the test's server has a port of its own. */
const README_ORIGIN = 'http://localhost:3000';

const hasJq = ((): boolean => {
  try {
    execFileSync('jq', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn("jq is missing: the README's examples are SKIPPED (apt-get install jq)");
    return false;
  }
})();

describe.skipIf(!hasJq)("the README's examples, pasted in order against a fresh npm start (needs jq)", () => {
  let scratch: string;
  let server: ChildProcess;
  let serverLog = '';
  let origin = '';
  let run: { code: number | null; stdout: string; stderr: string };
  /** The shell variables the walk-through ends with. */
  let vars: Record<string, string>;

  beforeAll(async () => {
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-readme-'));
    // As a reader's first `npm start`: nothing configured but where its ./data goes (the scratch
    // directory, where the examples run) and a free port.
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
    Object.assign(env, {
      NODE_ENV: 'development',
      PORT: '0',
      HOST: '127.0.0.1',
      PGLITE_DIR: path.join(scratch, 'data/pglite'),
      MEDIA_STORE: `file:${path.join(scratch, 'data/media')}`,
    });
    server = spawn('npm', ['start'], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout!.on('data', (chunk: Buffer) => (serverLog += chunk.toString()));
    server.stderr!.on('data', (chunk: Buffer) => (serverLog += chunk.toString()));
    await waitFor(
      'npm start to listen',
      () => {
        if (server.exitCode !== null) throw new Error(`npm start exited (${server.exitCode}):\n${serverLog}`);
        const listening = /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"listening"/.exec(serverLog);
        origin = listening?.[1] ?? '';
        return origin !== '';
      },
      150_000,
    );

    const blocks = shellBlocks(README).filter((b) => b.mark === 'readme-run');
    const script = [
      'set -euo pipefail',
      ...blocks.map((b) => `echo "=== README.md line ${b.line}" >&2\n${b.code.replaceAll(README_ORIGIN, origin)}`),
      `jq -n --arg BASE "$BASE" --arg KEY "$KEY" --arg CONTACT "$CONTACT" --arg THREAD "$THREAD" --arg NEW_THREAD "$NEW_THREAD" \\
        --arg ANA "$ANA" --arg BRUNO "$BRUNO" --arg REFUNDS "$REFUNDS" '$ARGS.named' > readme-vars.json`,
    ].join('\n');
    fs.writeFileSync(path.join(scratch, 'readme.sh'), script);
    run = await new Promise((resolve) => {
      const bash = spawn('bash', ['readme.sh'], { cwd: scratch, env: { PATH: process.env.PATH, HOME: process.env.HOME }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      const timer = setTimeout(() => bash.kill('SIGKILL'), 150_000);
      bash.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      bash.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      bash.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
    vars = run.code === 0 ? (JSON.parse(fs.readFileSync(path.join(scratch, 'readme-vars.json'), 'utf8')) as Record<string, string>) : {};
  }, 320_000);

  afterAll(async () => {
    if (server?.pid && server.exitCode === null) {
      process.kill(-server.pid, 'SIGTERM');
      await waitFor('npm start to stop', () => server.exitCode !== null || server.signalCode !== null, 20_000).catch(() =>
        process.kill(-server.pid!, 'SIGKILL'),
      );
    }
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  }, 30_000);

  const api = async (route: string): Promise<any> => {
    const response = await fetch(`${vars.BASE}${route}`, { headers: { authorization: `Bearer ${vars.KEY}` } });
    expect(response.status, route).toBe(200);
    return response.json();
  };

  it('when every readme-run block runs in order in one bash, then none fails', () => {
    // The failing block is the last "=== README.md line" of stderr.
    expect(run.code, `${run.stderr.slice(-3000)}\n--- stdout ---\n${run.stdout.slice(-2000)}`).toBe(0);
  });

  it('when the customer answers "9" after the NPS-on-close automation asked, then the score lands on the closed thread and opens none', async () => {
    const thread = await api(`/threads/${vars.THREAD}`);
    const threads = await api(`/threads?contactId=${vars.CONTACT}`);
    const messages = await api(`/threads/${vars.THREAD}/messages?limit=100`);

    expect(thread).toMatchObject({ status: 'closed', npsScore: 9 });
    expect(threads.pagination.total).toBe(1);
    expect(messages.data.filter((m: any) => m.direction === 'inbound').map((m: any) => m.content)).toContain('9');
  });

  it('when the walk-through ends, then each feature did what its example says', async () => {
    const runs = await api(`/automations/${vars.REFUNDS}/runs`);
    const byBruno = await api(`/threads?agentId=${vars.BRUNO}`);
    const byAna = await api(`/threads?agentId=${vars.ANA}`);
    const askedByHand = await api(`/threads/${vars.NEW_THREAD}`);

    expect(runs.data.map((r: any) => r.status)).toEqual(['succeeded']);
    expect([byAna.pagination.total, byBruno.pagination.total]).toEqual([2, 2]);
    expect(askedByHand.npsScore).toBe(10);
    expect(run.stdout).toContain('the same bytes');
    expect(run.stdout).toContain('event: thread.updated');
  });

  it('when the walk-through ends, then the server logged no error', () => {
    const errors = serverLog.split('\n').filter((line) => /^\{.*"level":(5|6)\d/.test(line));

    expect(errors).toEqual([]);
  });
});
