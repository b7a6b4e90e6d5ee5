#!/usr/bin/env node
// rate-limiter-flexible (RateLimiterRedis over ioredis): the Node peer of redlimit's benchmarks.
// Prints one JSON object a line, the same shape as redlimit_bench's. Bounded in count and time.
//
//   node benchmarks/peers/rlf_bench.js --port P [--host H] [--seconds S] [--max-ops N] [--reps R]
//        [--phase throughput|memory|all]
//
// Workload as redlimit's: 1000 points per 60 s per key, requests cycling over 10,000 keys, so
// nearly every consume is admitted. Modes: sequential (await each consume) and 64 in flight (64
// concurrent callers on the one ioredis connection, which pipelines them).
'use strict';

const path = require('path');
const modules = path.join(__dirname, 'node', 'node_modules');
const Redis = require(path.join(modules, 'ioredis'));
const { RateLimiterRedis } = require(path.join(modules, 'rate-limiter-flexible'));
const rlfVersion = require(path.join(modules, 'rate-limiter-flexible', 'package.json')).version;
const ioredisVersion = require(path.join(modules, 'ioredis', 'package.json')).version;

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const host = arg('host', '127.0.0.1');
const port = Number(arg('port', '6379'));
const seconds = Number(arg('seconds', '1.5'));
const maxOps = Number(arg('max-ops', '400000'));
const reps = Number(arg('reps', '1'));
const phase = arg('phase', 'all'); // throughput | memory | all

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function subject(i) {
  return 'u' + String(i).padStart(7, '0');
}

async function scriptStats(admin) {
  const info = await admin.info('commandstats');
  const stats = {};
  for (const line of info.split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (m) stats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  }
  let calls = 0;
  let usec = 0;
  for (const name of ['evalsha', 'eval']) {
    if (stats[name]) {
      calls += stats[name].calls;
      usec += stats[name].usec;
    }
  }
  const inner = Object.entries(stats)
    .filter(([n]) => !['evalsha', 'eval', 'config', 'info', 'ping'].includes(n))
    .map(([n, s]) => [n, s.calls]);
  return { calls, usec, inner };
}

// CPU seconds of Redis's main thread (user + system).
async function mainThreadCpu(admin) {
  const info = await admin.info('cpu');
  let total = 0;
  for (const line of info.split('\n')) {
    const m = /^used_cpu_(user|sys)_main_thread:([0-9.]+)/.exec(line.trim());
    if (m) total += Number(m[2]);
  }
  return total;
}

async function consumeOne(limiter, key) {
  try {
    await limiter.consume(key, 1);
    return 1;
  } catch (e) {
    if (e instanceof Error) throw e; // a real error, not a rejection (RateLimiterRes)
    return 0;
  }
}

// `inFlight` callers, each awaiting its own consumes one after another.
async function run(limiter, inFlight) {
  const deadline = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  const t0 = process.hrtime.bigint();
  let ops = 0;
  let allowed = 0;
  let next = 0;
  async function worker() {
    while (ops < maxOps && process.hrtime.bigint() < deadline) {
      const key = subject(next++ % 10000);
      ops++;
      const ok = await consumeOne(limiter, key); // not `allowed += await ...`: that reads `allowed` before awaiting
      allowed += ok;
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return { ops, allowed, secs };
}

async function main() {
  const client = new Redis({ host, port, enableOfflineQueue: true, lazyConnect: false });
  const admin = new Redis({ host, port });
  await client.ping();
  await admin.ping();

  // Load the script once (the first rlflxIncr is EVAL after NOSCRIPT), outside any measurement.
  const warm = new RateLimiterRedis({ storeClient: client, keyPrefix: 'rlf-warm', points: 1000, duration: 60 });
  await consumeOne(warm, 'warmup');

  for (const [mode, inFlight] of phase === 'memory' ? [] : [['seq', 1], ['inflight64', 64]]) {
    for (let rep = 0; rep < reps; rep++) {
      const limiter = new RateLimiterRedis({
        storeClient: client,
        keyPrefix: `rlf-${mode}-${rep}`,
        points: 1000,
        duration: 60,
      });
      await admin.call('CONFIG', 'RESETSTAT');
      const cpu0 = await mainThreadCpu(admin);
      const r = await run(limiter, inFlight);
      const cpu = (await mainThreadCpu(admin)) - cpu0;
      const s = await scriptStats(admin);
      emit({
        suite: 'peer',
        who: 'rate-limiter-flexible',
        mode,
        rep,
        in_flight: inFlight,
        ops: r.ops,
        allowed: r.allowed,
        seconds: r.secs,
        rate: r.ops / r.secs,
        script_calls: s.calls,
        usec_per_decision: r.ops ? s.usec / r.ops : 0,
        server_cpu_us_per_decision: r.ops ? (cpu * 1e6) / r.ops : 0,
        inner: s.inner.map(([n, c]) => `${n}=${(c / r.ops).toFixed(2)}`).join(' '),
      });
      process.stderr.write(`  [rlf_bench] ${mode} rep ${rep}: ${Math.round(r.ops / r.secs)}/s\n`);
    }
  }

  // Memory per key after one consume.
  if (phase === 'throughput') {
    client.disconnect();
    admin.disconnect();
    return;
  }
  // Memory per key after one consume, under the library's default key prefix ("rlflx").
  const mem = new RateLimiterRedis({ storeClient: client, points: 1000, duration: 60 });
  await admin.del('rlflx:u0000001');
  await consumeOne(mem, 'u0000001');
  const key = 'rlflx:u0000001';
  emit({
    suite: 'peer_memory',
    who: 'rate-limiter-flexible',
    state: 'one decision',
    key,
    bytes: await admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'),
  });
  emit({ suite: 'versions', who: 'rate-limiter-flexible', version: rlfVersion, ioredis: ioredisVersion,
    node: process.versions.node });

  client.disconnect();
  admin.disconnect();
}

const guard = setTimeout(() => {
  process.stderr.write('rlf_bench: gave up after 120 s\n');
  process.exit(1);
}, 120000);
main()
  .then(() => clearTimeout(guard))
  .catch((e) => {
    process.stderr.write(`rlf_bench: ${e.stack || e}\n`);
    process.exit(1);
  });
