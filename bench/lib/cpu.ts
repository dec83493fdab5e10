// CPU accounting from /proc (Linux): time used by the service's process group, by the PostgreSQL
// backends of the bench database, by redis-server, and by the whole machine, between two snapshots.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

let ticksPerSecond: number | undefined;

/** USER_HZ: the unit of the times in /proc/<pid>/stat. */
function ticks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

interface ProcStat {
  pgrp: number;
  /** user + system time of the process itself, in ms. */
  cpuMs: number;
  /** user + system time of its waited-for children, in ms. */
  childrenMs: number;
}

export function readProcStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return parseProcStat(text);
}

/** Parses one /proc/<pid>/stat line (the command name may contain spaces and parentheses). */
export function parseProcStat(text: string): ProcStat | undefined {
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  if (rest.length < 15) return undefined;
  const ms = (field: string | undefined): number => (Number(field) * 1000) / ticks();
  // Fields 3.. of proc(5): state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
  return { pgrp: Number(rest[2]), cpuMs: ms(rest[11]) + ms(rest[12]), childrenMs: ms(rest[13]) + ms(rest[14]) };
}

/** CPU ms of every live process in process group `pgid`. */
export function groupCpuMs(pgid: number): number {
  let total = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProcStat(Number(entry));
    if (stat?.pgrp === pgid) total += stat.cpuMs;
  }
  return total;
}

/** The PostgreSQL server's processes on this machine (the backends and the background ones): a request's cost is partly the server's. */
export function postgresPids(): number[] {
  try {
    return execFileSync('pgrep', ['-u', 'postgres'], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

export function pidsCpuMs(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + (readProcStat(pid)?.cpuMs ?? 0), 0);
}

/**
 * Voluntary context switches of `pids` (/proc/<pid>/status): each is a process going to sleep to
 * wait, for a PostgreSQL backend mostly for its client's next message, so each is a wake-up.
 */
export function pidsWakeups(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      total += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // a process that ended
    }
  }
  return total;
}

/** Busy and total CPU ms of the whole machine (all cores) from /proc/stat. */
export function machineCpuMs(): { busy: number; total: number } {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const values = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = values;
  const ms = (n: number): number => (n * 1000) / ticks();
  const total = user + nice + system + idle + iowait + irq + softirq + steal;
  return { busy: ms(total - idle - iowait), total: ms(total) };
}

export function loadAverage(): number {
  return Number(fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
}

export function cores(): number {
  return (
    fs
      .readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('processor')).length || 1
  );
}
