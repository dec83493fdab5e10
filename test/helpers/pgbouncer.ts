// A PgBouncer a test owns, in transaction pooling mode, in front of the run's PostgreSQL server: its
// own port, config and log in a temp directory, stopped and removed at the end. PgBouncer refuses
// to run as root, so as root it runs as the `postgres` user (as test/helpers/postgres.ts does).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort, sleep } from './processes.js';

const run = promisify(execFile);

/** The pgbouncer binary (Debian puts it in /usr/sbin), or undefined. */
export function pgbouncerBinary(): string | undefined {
  for (const dir of ['/usr/sbin', '/usr/bin', ...(process.env.PATH ?? '').split(':')]) {
    if (dir && fs.existsSync(path.join(dir, 'pgbouncer'))) return path.join(dir, 'pgbouncer');
  }
  return undefined;
}

export class PgBouncer {
  private constructor(
    private readonly dir: string,
    private readonly target: URL,
    readonly port: number,
  ) {}

  /** The URL of the target's database (and user) through this PgBouncer. */
  get url(): string {
    return this.urlFor(this.target.toString());
  }

  /** The URL of another database of the same server (and user), through this PgBouncer. */
  urlFor(databaseUrl: string): string {
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  /**
   * Starts PgBouncer in transaction pooling mode for any database of `targetUrl`'s server, logging
   * in as its user, and waits until it answers.
   */
  static async start(binary: string, targetUrl: string, options: { poolSize?: number } = {}): Promise<PgBouncer> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-pgbouncer-'));
    const target = new URL(targetUrl);
    const bouncer = new PgBouncer(dir, target, await freePort());
    const user = decodeURIComponent(target.username || os.userInfo().username);
    const password = decodeURIComponent(target.password);
    fs.writeFileSync(path.join(dir, 'userlist.txt'), `"${user}" "${password}"\n`);
    fs.writeFileSync(
      path.join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `* = host=${target.hostname} port=${target.port || 5432}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${bouncer.port}`,
        `unix_socket_dir = ${dir}`,
        'auth_type = trust',
        `auth_file = ${path.join(dir, 'userlist.txt')}`,
        'pool_mode = transaction',
        `default_pool_size = ${options.poolSize ?? 4}`,
        'max_client_conn = 200',
        `logfile = ${path.join(dir, 'pgbouncer.log')}`,
        `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
        '',
      ].join('\n'),
    );
    if (process.getuid?.() === 0) {
      const { stdout } = await run('id', ['-u', 'postgres']);
      const { stdout: gid } = await run('id', ['-g', 'postgres']);
      for (const file of ['', 'userlist.txt', 'pgbouncer.ini']) fs.chownSync(path.join(dir, file), Number(stdout.trim()), Number(gid.trim()));
    }
    await bouncer.as(binary, ['-d', path.join(dir, 'pgbouncer.ini')]);
    for (let tries = 0; ; tries++) {
      const client = new pg.Client({ connectionString: bouncer.url, connectionTimeoutMillis: 1_000 });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('select 1');
        await client.end();
        return bouncer;
      } catch (err) {
        await client.end().catch(() => {});
        if (tries >= 50) throw new Error(`PgBouncer did not answer: ${(err as Error).message}\n${bouncer.log()}`, { cause: err });
        await sleep(100);
      }
    }
  }

  /** What PgBouncer logged. */
  log(): string {
    try {
      return fs.readFileSync(path.join(this.dir, 'pgbouncer.log'), 'utf8');
    } catch {
      return '';
    }
  }

  /** Stops it (SIGTERM to the pid it wrote) and removes its directory. */
  async stop(): Promise<void> {
    try {
      const pid = Number(fs.readFileSync(path.join(this.dir, 'pgbouncer.pid'), 'utf8').trim());
      if (pid > 0) {
        process.kill(pid, 'SIGTERM');
        for (let tries = 0; tries < 50; tries++) {
          try {
            process.kill(pid, 0);
          } catch {
            break;
          }
          await sleep(100);
        }
      }
    } catch {
      // Not running.
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private async as(command: string, args: string[]): Promise<void> {
    const asRoot = process.getuid?.() === 0;
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
    await run(file, argv, { cwd: this.dir, timeout: 30_000 });
  }
}
