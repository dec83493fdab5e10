// Preloaded into a service under test (NODE_OPTIONS --import) to fail the way a bug would: on the
// first SIGUSR2 a promise nobody handles rejects, on the second an exception goes uncaught.
let probes = 0;
process.on('SIGUSR2', () => {
  probes += 1;
  if (probes === 1) {
    // The bug under test: a rejection with no handler.
    void Promise.reject(new Error('probe: a rejection nobody handles'));
  } else {
    setImmediate(() => {
      throw new Error('probe: an exception nobody catches');
    });
  }
});
