// Preloaded into the service by the bench (`--import ./bench/cpu-profile-hook.ts`) when
// BENCH_CPU_PROFILE names an output file: SIGUSR2 starts V8's sampling profiler, the next SIGUSR2
// stops it and writes a .cpuprofile (the format of node --cpu-prof), so the profile covers the load
// window only, not start-up and shutdown. `<file>.started` appears once the profiler runs.
import fs from 'node:fs';
import { Session } from 'node:inspector';

const output = process.env.BENCH_CPU_PROFILE;
const intervalUs = Number(process.env.BENCH_CPU_PROFILE_INTERVAL_US ?? 250);

if (output) {
  const session = new Session();
  session.connect();
  let running = false;
  const post = (method: string, params?: object): Promise<{ profile?: unknown }> =>
    new Promise((resolve, reject) => session.post(method, params, (err, result) => (err ? reject(err) : resolve(result as { profile?: unknown }))));

  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      void post('Profiler.enable')
        .then(() => post('Profiler.setSamplingInterval', { interval: intervalUs }))
        .then(() => post('Profiler.start'))
        .then(() => fs.writeFileSync(`${output}.started`, ''));
    } else {
      running = false;
      void post('Profiler.stop').then(({ profile }) => {
        fs.writeFileSync(`${output}.tmp`, JSON.stringify(profile));
        fs.renameSync(`${output}.tmp`, output);
      });
    }
  });
}
