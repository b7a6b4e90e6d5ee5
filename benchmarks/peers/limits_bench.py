#!/usr/bin/python3
"""Python `limits` (Debian python3-limits, RedisStorage over python3-redis): the Python peer of
redlimit's benchmarks. Prints one JSON object a line, the same shape as redlimit_bench's. Every loop
is bounded in count and time.

    /usr/bin/python3 benchmarks/peers/limits_bench.py --port P [--host H] [--seconds S]
        [--max-ops N] [--reps R] [--flood-limit L] [--phase throughput|memory|flood|all]

Workload as redlimit's: 1000 per minute per subject, hits cycling over 10,000 subjects (nearly every
hit admitted), one connection, sequential: FixedWindowRateLimiter and MovingWindowRateLimiter.
Flood: one subject of a moving window of L per 10 minutes hit 100 L times; Redis CPU per call in
each stage (fill to the limit, then 1-2x, 2-10x, 10-100x), as redlimit_bench's flood suite.
"""
import argparse
import json
import sys
import time

import limits
import redis
from limits import RateLimitItemPerMinute
from limits.storage import RedisStorage
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def script_stats(admin):
    stats = admin.info("commandstats")
    calls = usec = 0
    inner = {}
    for name, s in stats.items():
        short = name[len("cmdstat_"):] if name.startswith("cmdstat_") else name
        if short in ("evalsha", "eval"):
            calls += s["calls"]
            usec += s["usec"]
        elif short not in ("config", "info", "ping"):
            inner[short] = s["calls"]
    return calls, usec, inner


def main_thread_cpu(admin):
    info = admin.info("cpu")
    return info.get("used_cpu_user_main_thread", 0) + info.get("used_cpu_sys_main_thread", 0)


def subject(i):
    return "u%07d" % i


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--seconds", type=float, default=1.5)
    p.add_argument("--max-ops", type=int, default=400000)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--flood-limit", type=int, default=1000)
    p.add_argument("--phase", default="all", choices=("throughput", "memory", "flood", "all"))
    a = p.parse_args()

    uri = "redis://%s:%d" % (a.host, a.port)
    storage = RedisStorage(uri)
    admin = redis.Redis(host=a.host, port=a.port)
    strategies = {
        "fixed_window": FixedWindowRateLimiter(storage),
        "moving_window": MovingWindowRateLimiter(storage),
    }
    # Load the scripts once (the first call of each is EVAL after NOSCRIPT), outside any measurement.
    for s in strategies.values():
        s.hit(RateLimitItemPerMinute(1000, namespace="LWARM"), "warmup-" + type(s).__name__)

    for name, strategy in strategies.items() if a.phase in ("throughput", "all") else ():
        for rep in range(a.reps):
            item = RateLimitItemPerMinute(1000, namespace="L%s%d" % (name, rep))
            admin.config_resetstat()
            cpu0 = main_thread_cpu(admin)
            ops = allowed = 0
            t0 = time.perf_counter()
            deadline = t0 + a.seconds
            while ops < a.max_ops and time.perf_counter() < deadline:
                allowed += strategy.hit(item, subject(ops % 10000))
                ops += 1
            secs = time.perf_counter() - t0
            cpu = main_thread_cpu(admin) - cpu0
            calls, usec, inner = script_stats(admin)
            emit({
                "suite": "peer", "who": "limits " + name, "mode": "seq", "rep": rep, "ops": ops,
                "allowed": allowed, "seconds": secs, "rate": ops / secs, "script_calls": calls,
                "usec_per_decision": usec / ops if ops else 0,
                "server_cpu_us_per_decision": cpu * 1e6 / ops if ops else 0,
                "inner": " ".join("%s=%.2f" % (k, v / ops) for k, v in sorted(inner.items())),
            })
            sys.stderr.write("  [limits_bench] %s rep %d: %.0f/s\n" % (name, rep, ops / secs))

    # Memory per subject after one hit (the library's default namespace), and the moving window at
    # its full limit.
    for n, (name, strategy) in enumerate(strategies.items() if a.phase in ("memory", "all") else ()):
        item = RateLimitItemPerMinute(1000)
        who = "u%07d" % (n + 1)
        key = item.key_for(who)
        admin.delete(key)
        strategy.hit(item, who)
        emit({"suite": "peer_memory", "who": "limits " + name, "state": "one decision", "key": key,
              "bytes": admin.memory_usage(key, samples=0)})
        if name == "moving_window":
            for _ in range(999):
                strategy.hit(item, who)
            emit({"suite": "peer_memory", "who": "limits " + name, "state": "full limit", "key": key,
                  "bytes": admin.memory_usage(key, samples=0)})

    # Flood: a moving window of L per 10 minutes, one subject, 100 L hits.
    L = a.flood_limit
    item = RateLimitItemPerMinute(L, 10, namespace="LFLOOD")
    moving = strategies["moving_window"]
    deadline = time.perf_counter() + 90
    stages = ((0, L), (L, 2 * L), (2 * L, 10 * L), (10 * L, 100 * L)) if a.phase in ("flood", "all") else ()
    if stages:
        admin.delete(item.key_for("flooder"))
    for lo, hi in stages:
        admin.config_resetstat()
        sent, allowed = lo, 0
        t0 = time.perf_counter()
        while sent < hi and time.perf_counter() < deadline:
            allowed += moving.hit(item, "flooder")
            sent += 1
        secs = time.perf_counter() - t0
        calls, usec, _ = script_stats(admin)
        emit({"suite": "flood", "who": "limits moving window", "limit": L, "from": lo, "to": sent,
              "allowed": allowed, "rate": (sent - lo) / secs if secs > 0 else 0,
              "usec_per_call": usec / calls if calls else 0,
              "bytes": admin.memory_usage(item.key_for("flooder"), samples=0)})
        sys.stderr.write("  [limits_bench] flood %d..%d: %.2f us/call\n" % (lo, sent, usec / calls if calls else 0))

    emit({"suite": "versions", "who": "limits", "version": limits.__version__, "redis_py": redis.__version__,
          "python": sys.version.split()[0]})


if __name__ == "__main__":
    main()
