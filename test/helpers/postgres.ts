// A PostgreSQL cluster a test owns: initdb into a temp directory, its own port and socket
// directory, restarted or stopped at will (`-m fast`, `-m immediate`), removed at the end.
// initdb refuses to run as root, so as root the binaries run as the `postgres` user.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './processes.js';

const run = promisify(execFile);

/** The directory of initdb and pg_ctl (the newest installed version), or undefined. */
export function postgresBinaries(): string | undefined {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root) ? fs.readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) {
    const bin = path.join(root, version, 'bin');
    if (fs.existsSync(path.join(bin, 'initdb')) && fs.existsSync(path.join(bin, 'pg_ctl'))) return bin;
  }
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl'))) return dir;
  }
  return undefined;
}

export type StopMode = 'smart' | 'fast' | 'immediate';

export class PrivatePostgres {
  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    readonly port: number,
  ) {}

  /** postgres://root@127.0.0.1:<port>/<database> */
  url(database = 'postgres'): string {
    return `postgres://root@127.0.0.1:${this.port}/${database}`;
  }

  /** A new cluster, started, with `database` created in it. */
  static async create(bin: string, database: string): Promise<PrivatePostgres> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-pg-'));
    const server = new PrivatePostgres(bin, dir, await freePort());
    if (process.getuid?.() === 0) {
      const { uid, gid } = await userIds('postgres');
      fs.chownSync(dir, uid, gid);
    }
    await server.as(path.join(bin, 'initdb'), ['-D', path.join(dir, 'data'), '--auth=trust', '--username=root', '--encoding=UTF8', '--locale=C', '--no-sync']);
    await server.start();
    const admin = new pg.Client({ connectionString: server.url() });
    await admin.connect();
    await admin.query(`create database ${database}`);
    await admin.end();
    return server;
  }

  /** Starts it and waits until it accepts connections. */
  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`;
    await this.as(path.join(this.bin, 'pg_ctl'), [
      '-D',
      path.join(this.dir, 'data'),
      '-l',
      path.join(this.dir, 'log'),
      '-o',
      options,
      '-w',
      '-t',
      '60',
      'start',
    ]);
  }

  async stop(mode: StopMode): Promise<void> {
    await this.as(path.join(this.bin, 'pg_ctl'), ['-D', path.join(this.dir, 'data'), '-m', mode, '-w', '-t', '60', 'stop']);
  }

  /** Stops it (best effort) and removes its directory. */
  async destroy(): Promise<void> {
    await this.stop('immediate').catch(() => {});
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** True when a new connection can run a query now. */
  async accepts(): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 1_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  }

  private async as(command: string, args: string[]): Promise<void> {
    const asRoot = process.getuid?.() === 0;
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
    await run(file, argv, { cwd: this.dir, timeout: 90_000 });
  }
}

async function userIds(user: string): Promise<{ uid: number; gid: number }> {
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([run('id', ['-u', user]), run('id', ['-g', user])]);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}
