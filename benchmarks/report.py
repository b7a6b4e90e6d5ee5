#!/usr/bin/env python3
"""Writes docs/performance.md from one scripts/bench.sh run (python3 standard library only).

    python3 benchmarks/report.py --results results.jsonl [--micro micro.json] --out docs/performance.md
        --command "scripts/bench.sh" [--port P] [--load-before "a b c"] [--load-after "a b c"]
        [--elapsed S] [--reps R] [--seconds S] [--pin 0|1] [--cluster ran|skipped|failed]

results.jsonl holds one JSON object a line, from redlimit_bench (its cluster suite included: rows
"suite": "cluster"), rlf_bench.js, limits_bench.py and bench.sh's redis-benchmark runs. Every throughput row was repeated --reps times; the report keeps the
best of each (the highest rate, the lowest Redis CPU), the repetition least disturbed by anything
else running on the machine, and writes beside it the lowest-highest over the repetitions (its
spread), every repetition's figure computed on that repetition's rows alone.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
from collections import defaultdict, namedtuple

import report_failover

STRATEGIES = [
    ("fixed_window", "fixed window"),
    ("sliding_log", "sliding log"),
    ("sliding_window", "sliding window (precision = window)"),
    ("sliding_window_p10", "sliding window (precision = window/10)"),
    ("token_bucket", "token bucket"),
    ("leaky_bucket", "leaky bucket (meter)"),
    ("policy3", "policy of 3 limits"),
]
SHORT = {
    "fixed_window": "fixed window",
    "sliding_log": "sliding log",
    "sliding_window": "sliding window",
    "sliding_window_p10": "sliding window /10",
    "token_bucket": "token bucket",
    "leaky_bucket": "leaky bucket",
    "policy3": "policy (3)",
}
MODES = [
    ("seq", "1 connection, sequential"),
    ("pool2", "pool, 2 threads"),
    ("pool4", "pool, 4 threads"),
    ("pool8", "pool, 8 threads"),
    ("batch32", "consume_many, 32"),
    ("batch128", "consume_many, 128"),
    ("pool2_batch128", "2 threads x consume_many 128"),
    ("async64", "async, 64 in flight"),
    ("async64_unshared", "async, 64 in flight, a script call each"),
    ("async256", "async, 256 in flight"),
]
CPU_TARGET = ("fixed_window", "token_bucket", "leaky_bucket")
MEMORY_TARGET = ("token_bucket", "leaky_bucket")


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def dpkg_version(pkg):
    return run(["dpkg-query", "-W", "-f=${Version}", pkg]) or "not installed"


def fmt_rate(x):
    if x is None:
        return "-"
    if x >= 100000:
        return "{:,.0f}".format(round(x, -3))
    return "{:,.0f}".format(round(x, -1) if x >= 1000 else x)


def fmt_us(x):
    return "-" if x is None else "{:.2f}".format(x)


def ratio(x, y):
    return x / y if x is not None and y else None


def meets(value, goal, at_most=False):
    return value is not None and (value <= goal if at_most else value >= goal)


def verdict(ratio, goal, at_most=False):
    if ratio is None:
        return "not measured"
    return "{:.2f}x **{}**".format(ratio, "PASS" if meets(ratio, goal, at_most) else "MISS")


def median_range(vals):
    """ "median (min..max)" of the values, or "-". """
    vals = sorted(v for v in vals if v)
    if not vals:
        return "-", None
    med = vals[len(vals) // 2]
    return "{} ({}..{})".format(fmt_us(med), fmt_us(vals[0]), fmt_us(vals[-1])), med


def strategies_in(rows):
    """(strategy id, label) of every strategy in `rows`, in the order they first appear."""
    out = {}
    for r in rows:
        out.setdefault(r["strategy"], r["label"])
    return list(out.items())


def functions_section(res):
    rows = res.select(suite="functions")
    if not rows:
        return "(not measured in this run)"
    out = ["| strategy | FCALL, one a call (us) | EVALSHA, one a call (us) | FCALL / EVALSHA | "
           "FCALL, 128 a call (us) | EVALSHA, 128 a call (us) |", "|---|---:|---:|---:|---:|---:|"]
    for sid, label in strategies_in(rows):
        cells = {}
        for path in ("fcall", "evalsha"):
            for batch in (1, 128):
                vals = [r["usec_per_decision"] for r in res.select(suite="functions", strategy=sid, path=path, batch=batch)]
                cells[(path, batch)] = median_range(vals)
        f1, e1 = cells[("fcall", 1)][1], cells[("evalsha", 1)][1]
        ratio = "{:.2f}x".format(f1 / e1) if f1 and e1 else "-"
        out.append("| {} | {} | {} | {} | {} | {} |".format(label, cells[("fcall", 1)][0], cells[("evalsha", 1)][0], ratio,
                                                            cells[("fcall", 128)][0], cells[("evalsha", 128)][0]))
    return "\n".join(out)


def capacity_section(res):
    out = ["| strategy | mode | Redis main-thread CPU per decision (us) | decisions/s per core at 70% | "
           "masters for 1M/s | for 10M/s | for 100M/s |", "|---|---|---:|---:|---:|---:|---:|"]
    for sid, label in strategies_in(res.select(suite="throughput")):
        for mode in ("seq", "threads8", "async64", "batch128"):
            vals = [r.get("server_cpu_us_per_decision") for r in res.select(suite="throughput", strategy=sid, mode=mode)]
            vals = sorted(v for v in vals if v)
            if not vals:
                continue
            cpu = vals[len(vals) // 2]
            per_core = 0.7 * 1e6 / cpu
            masters = ["{:,}".format(int(-(-n // per_core))) for n in (1e6, 1e7, 1e8)]
            out.append("| {} | {} | {} | {} | {} | {} | {} |".format(label, mode, fmt_us(cpu), fmt_rate(per_core), *masters))
    return "\n".join(out) if len(out) > 2 else "(not measured in this run)"


# Eight caller threads on three pools: a connection a thread and the default 4, both sharing script
# calls and round trips (Options::share_script_calls and PoolOptions::coalesce, as connect() makes
# it), and the default 4 with both off (a connection leased per call, a script call each).
POOL_MODES = (("pool8", "pool of 8"), ("threads8", "pool of 4, shared (default)"),
              ("threads8_flights2", "pool of 4, shared, 2 calls out"), ("threads8_unshared", "pool of 4, unshared"))


def pool_section(res):
    """The pool-sizing table and its summary sentence: decisions/s of each pool against a connection
    a thread, and Redis's main-thread CPU per decision."""
    out = ["| strategy | " + " | ".join(label for _, label in POOL_MODES) + " |",
           "|---|" + "---:|" * len(POOL_MODES)]
    shared, unshared = [], []
    for sid, label in strategies_in(res.select(suite="throughput")):
        base = rate_of(res, sid, "pool8")
        cells = []
        for mode, _ in POOL_MODES:
            rate = rate_of(res, sid, mode)
            cpu = res.min_usec("server_cpu_us_per_decision", suite="throughput", strategy=sid, mode=mode)
            if rate is None:
                cells.append("-")
                continue
            cell = "{} ({}, {} us)".format(fmt_rate(rate), "{:.2f}x".format(rate / base) if base else "-", fmt_us(cpu))
            cells.append(cell)
            if base and mode == "threads8":
                shared.append(rate / base)
            if base and mode == "threads8_unshared":
                unshared.append(rate / base)
        if any(c != "-" for c in cells):
            out.append("| {} | {} |".format(label, " | ".join(cells)))
    if len(out) <= 2:
        return "(not measured in this run)", ""

    def span(xs):
        return "{:.2f}x to {:.2f}x".format(min(xs), max(xs)) if xs else "not measured"

    summary = ("Eight threads on the default pool of 4 reach {} of a connection a thread with sharing on, "
               "and {} with it off.".format(span(shared), span(unshared)))
    return "\n".join(out), summary


# The suites bench.sh repeats BENCH_REPS times (their rows carry "rep"); the functions suite has
# its own fixed 3 repetitions and is left out, so that BENCH_REPS=1 reads as measured once.
REPEATED_SUITES = ("throughput", "cluster", "peer", "redis-benchmark", "raw")


class Results:
    def __init__(self, path=None, rows=None):
        self.rows = list(rows or [])
        self._reps = {}
        if path is None:
            return
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    self.rows.append(json.loads(line))
                except ValueError:
                    pass

    def select(self, **kw):
        return [r for r in self.rows if all(r.get(k) == v for k, v in kw.items())]

    def best(self, key, higher, where=None, **kw):
        """The highest (or lowest) `key` of the rows that match, or None: over every repetition,
        the one least disturbed by anything else running on the machine."""
        vals = [r[key] for r in self.select(**kw) if r.get(key) and (where is None or where(r))]
        return (max if higher else min)(vals) if vals else None

    def best_rate(self, **kw):
        return self.best("rate", True, **kw)

    def min_usec(self, key="usec_per_decision", where=None, **kw):
        return self.best(key, False, where, **kw)

    def first(self, **kw):
        rows = self.select(**kw)
        return rows[0] if rows else None

    def reps(self):
        """The repetitions of the repeated suites, in order."""
        return sorted({r["rep"] for r in self.rows if r.get("suite") in REPEATED_SUITES and "rep" in r})

    def rep(self, n):
        """The rows of repetition n alone: any figure computed on them is that repetition's."""
        if n not in self._reps:
            self._reps[n] = Results(rows=[r for r in self.rows if r.get("rep") == n])
        return self._reps[n]


def fmt_k(x):
    """A rate in three significant digits for a range (198k, 60.1k, 6.76k): the spread's ends need
    no more, and the best beside them is written in full."""
    x = float("{:.3g}".format(x))
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return "{:g}{}".format(x / scale, unit)
    return "{:g}".format(x)


def per_rep(res, figure):
    """`figure` (a function of a Results) computed on each repetition alone; None where it is missing."""
    return [figure(res.rep(n)) for n in res.reps()]


def with_spread(res, figure, fmt=fmt_rate, short=None, none="missing"):
    """ "best (lowest–highest)" of `figure` over the repetitions, e.g. "34,580 (33.9k–34.6k)". The
    best is figure(res) on every row at once: one end of the range for a best-of figure, inside it for
    a ratio of two (each repetition's own ratio). A figure measured once is written alone (the prose
    says so): a range of one value would be an invented spread."""
    best = figure(res)
    if best is None:
        return none
    reps = res.reps()
    vals = [v for v in per_rep(res, figure) if v is not None]
    if len(reps) <= 1:
        return fmt(best)
    if len(vals) <= 1:
        return "{} (1 run)".format(fmt(best))
    short = short or fmt
    span = "{}–{}".format(short(min(vals)), short(max(vals)))
    if len(vals) < len(reps):
        span += ", {} of {} runs".format(len(vals), len(reps))
    return "{} ({})".format(fmt(best), span)


def spread_note(res, what="Each figure"):
    """The sentence that says how to read the spreads, or that there are none."""
    n = len(res.reps())
    if n <= 1:
        return ("{} was measured once (BENCH_REPS=1 or no repetitions recorded): no spread is "
                "shown.".format(what))
    return ("{} is the best of {} repetitions (the highest rate, the lowest Redis CPU), followed by "
            "the lowest–highest over the repetitions in brackets (k = thousand, M = million); \"(1 run)\" "
            "marks a figure measured in one repetition only.".format(what, n))


def repetitions(res):
    n = len(res.reps())
    return "the best of {} repetitions, lowest–highest in brackets".format(n) if n > 1 else "measured once: no spread"


def rate_of(res, sid, mode, suite="throughput"):
    return res.best_rate(suite=suite, strategy=sid, mode=mode)


def script_usec(res, sid):
    # The same script runs in every mode: the least disturbed of all its runs.
    return res.min_usec(suite="throughput", strategy=sid)


def single_usec(res, sid):
    """Script time per decision in the modes where each decision is a script call of its own (not
    consume_many, nor the async modes whose calls of one loop turn share a script call)."""
    return res.min_usec(suite="throughput", strategy=sid,
                        where=lambda r: not r.get("batch") and r.get("script_calls", 0) >= r.get("ops", 0))


def server_cpu(res, mode, **kw):
    return res.min_usec(key="server_cpu_us_per_decision", mode=mode, **kw)


def machine_section(a, res):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = "{:.1f} GiB".format(int(line.split()[1]) / 1024 / 1024)
    except OSError:
        pass
    redis_version = ""
    if a.port:
        info = run(["redis-cli", "-p", str(a.port), "INFO", "server"])
        m = re.search(r"redis_version:(\S+)", info)
        redis_version = m.group(1) if m else ""
    if not redis_version:
        m = re.search(r"v=(\S+)", run(["redis-server", "--version"]))
        redis_version = m.group(1) if m else "unknown"
    gxx = run(["g++", "-dumpfullversion"]) or "unknown"
    node = run(["node", "--version"]) or "unknown"
    rlf = res.first(suite="versions", who="rate-limiter-flexible") or {}
    lim = res.first(suite="versions", who="limits") or {}
    rows = [
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("command", "`{}`".format(a.command)),
        ("machine", "{} cores ({}), {} memory, Linux {}".format(os.cpu_count(), cpu, mem, platform.release())),
        ("load average (1/5/15 min)", "before: {}; after: {}".format(a.load_before or "?", a.load_after or "?")),
        ("redis-server", "{} (started by bench.sh on a loopback port, `--save \"\" --appendonly no`)".format(
            redis_version)),
        ("hiredis", dpkg_version("libhiredis-dev")),
        ("g++", "{} (Release build: -O3)".format(gxx)),
        ("fmt / Google Benchmark", "{} / {}".format(dpkg_version("libfmt-dev"), dpkg_version("libbenchmark-dev"))),
        ("node", node),
        ("rate-limiter-flexible / ioredis", "{} / {}".format(rlf.get("version", "?"), rlf.get("ioredis", "?"))),
        ("python limits / redis-py", "{} / {} (Debian python3-limits, python3-redis; Python {})".format(
            lim.get("version", dpkg_version("python3-limits")), lim.get("redis_py", "?"), lim.get("python", "?"))),
        ("repetitions", "{} of every throughput row, {} s each, best kept; run took {} s".format(
            a.reps, a.seconds, a.elapsed)),
        ("CPU pinning", "redis-server (and the cluster's nodes) on CPU 0, every client on CPU 1" if a.pin == "1"
         else "none (BENCH_PIN=1 pins redis-server to CPU 0 and the clients to CPU 1)"),
        ("Redis Cluster", {
            "ran": "3 masters + 3 replicas of the same redis-server, started by `scripts/cluster.sh` on loopback "
                   "ports (`--save \"\" --appendonly no`), up during the throughput repetitions only",
            "skipped": "not run (BENCH_CLUSTER=0)",
            "failed": "did not start (`scripts/cluster.sh start` failed): no cluster rows",
        }.get(a.cluster, a.cluster)),
    ]
    out = ["| | |", "|---|---|"]
    out += ["| {} | {} |".format(k, v) for k, v in rows]
    return "\n".join(out)


# Every mode: the async ones run over AsyncCluster (a row with "missing" says why one could not run).
# A cluster's batches, a script call per slot (Options::batch_per_master off): the A/B of one call per master.
CLUSTER_MODES = MODES + [("batch128_per_slot", "consume_many, 128, a script call per slot")]
# What a cluster-only mode is beside on the one server (where it is the same thing).
ONE_SERVER_TWIN = {"batch128_per_slot": "batch128"}


def best_mode(res, sid, modes=MODES, suite="throughput"):
    """The fastest concurrent mode of `modes` (all but sequential) for strategy `sid`: (rate, mode)."""
    best, which = None, None
    for mode, _ in modes:
        if mode == "seq":
            continue
        r = rate_of(res, sid, mode, suite)
        if r is not None and (best is None or r > best):
            best, which = r, mode
    return best, which


def cluster_absent(a):
    """Why a run has no cluster rows, from bench.sh's --cluster."""
    return {
        "skipped": "the cluster was not run (`BENCH_CLUSTER=0`)",
        "failed": "the local cluster did not start (`scripts/cluster.sh start` failed; the run's log says why)",
    }.get(a.cluster, "no cluster rows in the results")


def cluster_report(res, a):
    """The section "Redis Cluster (3 masters) vs one server": the cluster suite's rows beside the one
    server's, from the same run."""
    if not res.select(suite="cluster"):
        return "_Not measured in this run: {}._".format(cluster_absent(a))

    def cl_rate(sid, mode):
        return rate_of(res, sid, mode, "cluster")

    def cell(cluster_figure, c, v, cm="", vm=""):
        """Cluster / one server = ratio; the cluster's figure with its spread (the one server's is in
        the table above, the same figure)."""
        if c is None and v is None:
            return "-"
        times = "{:.2f}x".format(c / v) if c and v else "-"
        return "{}{} / {}{} = {}".format(cm, with_spread(res, cluster_figure, short=fmt_k), vm,
                                         fmt_rate(v) if v else "missing", times)

    ran = [(m, lbl) for m, lbl in CLUSTER_MODES if any(cl_rate(s, m) for s, _ in STRATEGIES)]
    t = ["| mode | " + " | ".join(SHORT[s] for s, _ in STRATEGIES) + " |", "|---|" + "---:|" * len(STRATEGIES)]
    ratios = defaultdict(list)  # mode -> ratios over the strategies
    for mode, label in ran:
        cells = []
        for s, _ in STRATEGIES:
            c, v = cl_rate(s, mode), rate_of(res, s, ONE_SERVER_TWIN.get(mode, mode))
            cells.append(cell(lambda rr: rate_of(rr, s, mode, "cluster"), c, v))
            if c and v:
                ratios[mode].append(c / v)
        t.append("| {} | {} |".format(label, " | ".join(cells)))
    cells = []
    for s, _ in STRATEGIES:
        (c, cm), (v, vm) = best_mode(res, s, CLUSTER_MODES, "cluster"), best_mode(res, s, CLUSTER_MODES)
        cells.append(cell(lambda rr: best_mode(rr, s, CLUSTER_MODES, "cluster")[0], c, v,
                          "{}: ".format(cm or "-"), "{}: ".format(vm or "-")))
        if c and v:
            ratios["best"].append(c / v)
    t.append("| **best of these concurrent modes** | {} |".format(" | ".join(cells)))
    table = "\n".join(t)

    # Redis's side: main-thread CPU per decision (summed over the masters) and how the decisions
    # spread over the masters.
    def cpu(suite, sid, mode):
        if suite == "throughput":  # the one server's: its spread is in the Redis CPU table
            return fmt_us(server_cpu(res, mode, suite=suite, strategy=sid))
        return with_spread(res, lambda rr: server_cpu(rr, mode, suite=suite, strategy=sid), fmt_us, none="-")

    def master_shares(sid):
        shares = []
        for r in res.select(suite="cluster", strategy=sid):
            calls = [int(x) for x in str(r.get("script_calls_per_master", "")).split() if x.isdigit()]
            if calls and sum(calls) > 0:
                shares += [100.0 * x / sum(calls) for x in calls]
        return "{:.0f}-{:.0f}%".format(min(shares), max(shares)) if shares else "-"

    masters = max([r.get("masters", 0) for r in res.select(suite="cluster")] or [0])
    sv = ["| strategy | Redis main-thread CPU per decision, sequential: cluster / one server (us) | the same, "
          "consume_many 128 (us) | the cluster's, consume_many 128 with a script call per slot (us) | "
          "each master's share of the decisions |", "|---|---:|---:|---:|---:|"]
    for s, label in STRATEGIES:
        sv.append("| {} | {} / {} | {} / {} | {} | {} |".format(
            label, cpu("cluster", s, "seq"), cpu("throughput", s, "seq"),
            cpu("cluster", s, "batch128"), cpu("throughput", s, "batch128"),
            cpu("cluster", s, "batch128_per_slot"), master_shares(s)))
    server_table = "\n".join(sv)

    def span(mode):
        r = ratios.get(mode)
        if not r:
            return None
        return "{:.2f}x".format(r[0]) if len(r) == 1 else "{:.2f}x to {:.2f}x".format(min(r), max(r))

    labels = {"seq": "sequential on 1 connection", "pool8": "a pool of 8 threads", "batch128": "consume_many 128",
              "best": "the best concurrent mode"}
    summary = "; ".join("{}: {}".format(labels[m], span(m)) for m in ["seq", "pool8", "batch128", "best"] if span(m))
    every = [x for m, r in ratios.items() if m != "best" for x in r]
    cores = os.cpu_count()
    if every and sorted(every)[len(every) // 2] < 1:
        why = (
            "Why the cluster is not faster here: this is one {cores}-core machine. The {m} masters, their {m} replicas "
            "(each applies every write its master streams to it) and the client all share those {cores} cores, "
            "where the one server has no replica and a core nearly to itself; {m} Redis threads cannot run side by "
            "side on {cores} cores, so the cluster adds routing, replication and context switches without adding "
            "CPU. `consume_many` is one script call per master (its spread function, `Options::batch_per_master`), "
            "where one server takes the whole batch in one; each master's call reads each request's keys with a "
            "command of their own (a command may not span slots) and streams its writes to a replica; the "
            "calls are written to every master before any reply is read, so the masters work side by side, but on "
            "{cores} cores they cannot all run at once. The row \"a script call per slot\" is the same batch "
            "split by hash slot, as before `batch_per_master`: 128 subjects over 16,384 slots are 128 script "
            "calls. A cluster's gain, each master on "
            "cores of its own on its own machine, cannot show on one machine: read these ratios as the cost of "
            "routing and replication, not as a cluster's capacity.").format(cores=cores, m=masters or 3)
    else:
        why = (
            "On this {cores}-core machine the {m} masters, their {m} replicas and the client share the same cores; "
            "a cluster's real gain comes from giving each master a machine of its own.").format(
                cores=cores, m=masters or 3)

    missing = [r["missing"] for r in res.select(suite="cluster") if r.get("missing")]
    async_note = ""
    if missing:
        async_note = ("\nThe asynchronous modes (async, 64 and 256 in flight) are not measured on the cluster: "
                      "{}.\n".format(missing[0]))

    return """The same strategies and modes as the table above, on a local Redis Cluster of {m} masters and {m}
replicas (`scripts/cluster.sh`, every node on this machine), in the same run: each repetition measured
the one server and then the cluster, and the best repetition of each is kept. Through
`RateLimiter::connect("redis-cluster://...")`: a pool per master (a pool of N for N threads), and
`consume_many` one script call per master, all written before any is read, and every script an
`FCALL` of the library, loaded on every master. Each cell: decisions/s on the cluster / on the one
server = their ratio. {spreads} The one server's figure is written alone: its spread is in the table above.

{table}
{async_note}
Cluster / one server in this run, over the strategies: {summary}. {why}

Redis's side: the main thread's CPU per decision, summed over the masters (it includes streaming each
write to the master's replica; the replicas' own CPU is not counted), and how the decisions spread
over the masters (subjects land on the masters by their key's hash slot). The cluster's figures with
their spread over the repetitions as above; the one server's spread is in the table "Redis CPU per decision".

{server_table}""".format(m=masters or 3, table=table, async_note=async_note, summary=summary or "-", why=why,
                         server_table=server_table, spreads=spread_note(res, "The cluster's figure"))


RLF = "rate-limiter-flexible"
ALL = tuple(s for s, _ in STRATEGIES)

# One side of an issue-13 ratio: `figure(res, sid)` is the number (on a whole run or one repetition
# of it), `rows(sid)` selects its rows, where a driver that could not measure them says why
# ("missing"), and `what` names them when no row says.
Side = namedtuple("Side", "what figure rows")


def mode_side(suite, mode, key="rate"):
    """One mode's figure for a strategy: decisions/s (the highest) or a Redis CPU (the lowest)."""
    return Side("`{}` rows{}".format(mode, " on the cluster" if suite == "cluster" else ""),
                lambda res, sid: res.best(key, key == "rate", suite=suite, strategy=sid, mode=mode),
                lambda sid: dict(suite=suite, strategy=sid, mode=mode))


SINGLE_CALL = Side("rows of one script call per decision", single_usec, lambda sid: dict(suite="throughput", strategy=sid))
RLF_SCRIPT = Side("rate-limiter-flexible rows", lambda res, sid: res.min_usec(suite="peer", who=RLF),
                  lambda sid: dict(suite="peer", who=RLF))
BEST_CONCURRENT = Side("concurrent rows", lambda res, sid: best_mode(res, sid)[0],
                       lambda sid: dict(suite="throughput", strategy=sid))
RB_P32 = Side("`redis-benchmark -P 32` rows", lambda res, sid: res.best_rate(suite="redis-benchmark", mode="P32"),
              lambda sid: dict(suite="redis-benchmark", mode="P32"))
RLF_64 = Side("rate-limiter-flexible 64-in-flight rows",
              lambda res, sid: res.best_rate(suite="peer", who=RLF, mode="inflight64"),
              lambda sid: dict(suite="peer", who=RLF, mode="inflight64"))

# How a figure is written: its best in full, the ends of its range (compact for rates), its unit.
Unit = namedtuple("Unit", "fmt short name")
RATE = Unit(fmt_rate, fmt_k, "decisions/s")
USEC = Unit(fmt_us, fmt_us, "us")
Target = namedtuple("Target", "number figure strategies ours theirs goal at_most unit")
ISSUE13 = [
    Target("1", "Redis CPU per single decision (script time, one script call per decision) vs "
                "rate-limiter-flexible's script", CPU_TARGET, SINGLE_CALL, RLF_SCRIPT, 1.0, True, USEC),
    Target("2", "the same, sliding window (precision = window) and a policy of 3 limits",
           ("sliding_window", "policy3"), SINGLE_CALL, RLF_SCRIPT, 1.3, True, USEC),
    Target("3", "Redis CPU per decision (script time) in `consume_many` 128 vs rate-limiter-flexible's single",
           ALL, mode_side("throughput", "batch128", "usec_per_decision"), RLF_SCRIPT, 0.5, True, USEC),
    Target("4", "async, 64 in flight: decisions/s vs rate-limiter-flexible, 64 in flight", ALL,
           mode_side("throughput", "async64"), RLF_64, 1.5, False, RATE),
    Target("5", "best concurrent mode vs the `redis-benchmark -c 1 -P 32` EVALSHA ceiling", ALL, BEST_CONCURRENT,
           RB_P32, 0.9, False, RATE),
    Target("6", "3-master cluster, batched (`consume_many` 128), vs one server in the same run", ALL,
           mode_side("cluster", "batch128"), mode_side("throughput", "batch128"), 1.0, False, RATE),
    Target("6", "3-master cluster, async (64 in flight), vs one server in the same run", ALL,
           mode_side("cluster", "async64"), mode_side("throughput", "async64"), 1.0, False, RATE),
    Target("7", "Redis main-thread CPU per decision, 8 threads calling `consume()` on the pool (of 4), vs the "
                "pipelined figure (`consume_many` 128)", ALL,
           mode_side("throughput", "threads8", "server_cpu_us_per_decision"),
           mode_side("throughput", "batch128", "server_cpu_us_per_decision"), 2.0, True, USEC),
]


def why_missing(res, side, sid, absent):
    """What a driver recorded for the missing rows, else why their whole suite is absent (`absent`:
    suite -> reason), else which rows are missing."""
    kw = side.rows(sid)
    said = [r["missing"] for r in res.select(**kw) if r.get("missing")]
    if said:
        return said[0]
    if not res.select(suite=kw["suite"]) and kw["suite"] in absent:
        return absent[kw["suite"]]
    return "no {} in this run's results".format(side.what)


def target_row(res, t, sid, absent):
    """(strategy, measured, ratio, verdict) of target t for one strategy. The verdict reads the ratio
    of the bests, as the issue-4 table does; the ratio's range is each repetition's own ratio (the
    two sides of it are measured in the same repetition), which always contains it."""
    ours, theirs = t.ours.figure(res, sid), t.theirs.figure(res, sid)
    if ours is None or theirs is None:
        side = t.ours if ours is None else t.theirs
        return SHORT[sid], "not measured: " + why_missing(res, side, sid, absent), "-", "**MISS**"

    def spread_of(side):
        return with_spread(res, lambda rr: side.figure(rr, sid), t.unit.fmt, t.unit.short)

    measured = "{} / {} {}".format(spread_of(t.ours), spread_of(t.theirs), t.unit.name)
    x = with_spread(res, lambda rr: ratio(t.ours.figure(rr, sid), t.theirs.figure(rr, sid)), "{:.2f}x".format)
    return SHORT[sid], measured, x, "**{}**".format("PASS" if meets(ours / theirs, t.goal, t.at_most) else "MISS")


def issue13_section(res, absent):
    """The section "Targets of issue 13": a row per target and strategy, from this run's rows, and a
    line that counts the passes. `absent`: suite -> why the run has none of its rows."""
    out = ["| # | figure | strategy | measured: redlimit / reference | ratio | target | verdict |",
           "|---|---|---|---|---:|---|---|"]
    passed = defaultdict(lambda: [0, 0])  # target number -> [rows passed, rows]
    for t in ISSUE13:
        rows = [target_row(res, t, sid, absent) for sid in t.strategies]
        # A target no strategy could be measured for, for one reason, is one row, not one per strategy.
        if len(rows) > 1 and len({r[1:] for r in rows}) == 1 and rows[0][2] == "-":
            rows = [("every strategy",) + rows[0][1:]]
        for k, r in enumerate(rows):
            head = (t.number, t.figure) if k == 0 else ("", "")
            out.append("| {} | {} | {} | {} | {} | {} {:.1f}x | {} |".format(
                *head, *r[:3], "<=" if t.at_most else ">=", t.goal, r[3]))
            passed[t.number][0] += r[3] == "**PASS**"
            passed[t.number][1] += 1
    total = [sum(p[k] for p in passed.values()) for k in (0, 1)]
    return "\n".join(out), "{} of the {} rows pass (by target: {}).".format(
        total[0], total[1], ", ".join("{} {}/{}".format(n, *p) for n, p in passed.items()))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", required=True)
    p.add_argument("--micro")
    p.add_argument("--out", required=True)
    p.add_argument("--command", default="scripts/bench.sh")
    p.add_argument("--port")
    p.add_argument("--load-before")
    p.add_argument("--load-after")
    p.add_argument("--elapsed", default="?")
    p.add_argument("--reps", default="?")
    p.add_argument("--seconds", default="?")
    p.add_argument("--pin", default="0")
    p.add_argument("--cluster", default="skipped", help="ran, skipped (BENCH_CLUSTER=0) or failed")
    a = p.parse_args()
    res = Results(a.results)

    rb_c1 = res.best_rate(suite="redis-benchmark", mode="c1")
    rb_p32 = res.best_rate(suite="redis-benchmark", mode="P32")
    rb_usec = res.min_usec(suite="redis-benchmark", mode="c1")
    raw_seq = res.best_rate(suite="raw", mode="seq")
    empty_usec = res.min_usec(suite="raw", mode="empty_decision_script")
    rlf_seq = res.best_rate(suite="peer", who="rate-limiter-flexible", mode="seq")
    rlf_64 = res.best_rate(suite="peer", who="rate-limiter-flexible", mode="inflight64")
    rlf_usec = res.min_usec(suite="peer", who="rate-limiter-flexible")
    rlf_inner = (res.first(suite="peer", who="rate-limiter-flexible", mode="seq") or {}).get("inner", "")

    def rate(sid, mode):
        return rate_of(res, sid, mode)

    def usec(sid):
        return script_usec(res, sid)

    def inner(sid):
        row = res.first(suite="throughput", strategy=sid, mode="seq") or {}
        return " ".join(x for x in row.get("inner", "").split() if not x.startswith("config"))

    def best_concurrent(sid):
        return best_mode(res, sid)

    def mem_of(s):  # the mean over the subjects when measured, else the one subject's
        r = res.first(suite="memory", strategy=s, state="one decision") or {}
        return r.get("bytes_mean", r.get("bytes"))

    mem_one = {s: mem_of(s) for s, _ in STRATEGIES}
    mem_full_log = (res.first(suite="memory", strategy="sliding_log", state="full limit") or {}).get("bytes")
    flood_ours = res.select(suite="flood", who="redlimit sliding log")
    flood_lim = res.select(suite="flood", who="limits moving window")
    flood_last_ours = flood_ours[-1]["usec_per_call"] if flood_ours else None
    flood_last_lim = flood_lim[-1]["usec_per_call"] if flood_lim else None

    missing_async = [r for r in res.select(suite="throughput") if r.get("missing")]

    # ---- Targets ---------------------------------------------------------------------------------
    t = []
    t.append("| target (issue 4) | " + " | ".join(SHORT[s] for s, _ in STRATEGIES) + " |")
    t.append("|---|" + "---|" * len(STRATEGIES))
    misses = defaultdict(list)

    def row(name, cells):
        t.append("| {} | {} |".format(name, " | ".join(cells)))

    cells = []
    for s, _ in STRATEGIES:
        r = ratio(rate(s, "seq"), rb_c1)
        cells.append(verdict(r, 0.9))
        if r is not None and r < 0.9:
            misses["seq_rb"].append((s, r))
    row("sequential, 1 connection >= 0.9x `redis-benchmark -c 1` EVALSHA", cells)
    cells = []
    for s, _ in STRATEGIES:
        r = ratio(rate(s, "seq"), rlf_seq)
        cells.append(verdict(r, 1.3))
        if r is not None and r < 1.3:
            misses["seq_rlf"].append((s, r))
    row("sequential, 1 connection >= 1.3x rate-limiter-flexible sequential", cells)
    cells = []
    for s, _ in STRATEGIES:
        b, _m = best_concurrent(s)
        r = ratio(b, rlf_64)
        cells.append(verdict(r, 5))
        if r is not None and r < 5:
            misses["conc_rlf"].append((s, r))
    row("best concurrent mode >= 5x rate-limiter-flexible, 64 in flight", cells)
    cells = []
    for s, _ in STRATEGIES:
        b, _m = best_concurrent(s)
        r = ratio(b, rb_p32)
        cells.append(verdict(r, 0.5))
        if r is not None and r < 0.5:
            misses["conc_p32"].append((s, r))
    row("best concurrent mode >= 0.5x `redis-benchmark -P 32` EVALSHA", cells)
    cells = []
    for s, _ in STRATEGIES:
        if s not in CPU_TARGET:
            cells.append("n/a")
            continue
        r = ratio(usec(s), rlf_usec)
        cells.append(verdict(r, 0.6, at_most=True))
        if r is not None and r > 0.6:
            misses["cpu"].append((s, r))
    row("Redis CPU per decision <= 0.6x rate-limiter-flexible's script", cells)
    cells = []
    for s, _ in STRATEGIES:
        if s != "sliding_log":
            cells.append("n/a")
            continue
        r = ratio(flood_last_ours, flood_last_lim)
        cells.append(verdict(r, 1.0, at_most=True))
        if r is not None and r > 1.0:
            misses["flood"].append((s, r))
    row("flooded at 100x its limit: Redis CPU per request <= limits' moving window", cells)
    cells = []
    for s, _ in STRATEGIES:
        if s not in MEMORY_TARGET:
            cells.append("n/a")
            continue
        b = mem_one.get(s)
        ok = b is not None and b <= 100
        cells.append("-" if b is None else "{:.1f} B **{}**".format(b, "PASS" if ok else "MISS"))
        if b is not None and b > 100:
            misses["memory"].append((s, b))
    row("memory per subject <= 100 bytes", cells)
    targets_table = "\n".join(t)

    # ---- Throughput table ------------------------------------------------------------------------
    th = ["| mode | " + " | ".join(SHORT[s] for s, _ in STRATEGIES) + " |", "|---|" + "---:|" * len(STRATEGIES)]
    for mode, label in MODES:
        cells = [with_spread(res, lambda rr: rate_of(rr, s, mode), short=fmt_k) for s, _ in STRATEGIES]
        th.append("| {} | {} |".format(label, " | ".join(cells)))
    cells = []
    for s, _ in STRATEGIES:
        b, m = best_concurrent(s)
        # Each repetition's own best mode: the range is of the row's figure, whichever mode won.
        cells.append("{}: {}".format(m, with_spread(res, lambda rr: best_mode(rr, s)[0], short=fmt_k)) if b else "-")
    th.append("| **best concurrent** | {} |".format(" | ".join(cells)))
    throughput_table = "\n".join(th)

    cluster_section = cluster_report(res, a)
    issue13_table, issue13_summary = issue13_section(res, {"cluster": cluster_absent(a)})

    def us(figure):  # a Redis CPU figure (us per decision) with its spread over the repetitions
        return with_spread(res, figure, fmt_us, none="-")

    def ceiling_row(label, kw, has_rate=True, usec_kw=None):
        rate_cell = with_spread(res, lambda rr: rr.best_rate(**kw), short=fmt_k, none="-") if has_rate else "-"
        return "| {} | {} | {} |".format(label, rate_cell, us(lambda rr: rr.min_usec(**(usec_kw or kw))))

    rlf = dict(suite="peer", who=RLF)
    ceiling = [
        "| what | decisions/s | Redis CPU per call (us) |",
        "|---|---:|---:|",
        ceiling_row("`redis-benchmark -c 1` EVALSHA of `return redis.call('INCR', KEYS[1])`",
                    dict(suite="redis-benchmark", mode="c1")),
        ceiling_row("`redis-benchmark -c 1 -P 32`, the same", dict(suite="redis-benchmark", mode="P32")),
        ceiling_row("the same script through redlimit's RedisConnection (hiredis), sequential",
                    dict(suite="raw", mode="seq")),
        ceiling_row("the same, pipelined by 32", dict(suite="raw", mode="pipeline32")),
        ceiling_row("floor of a decision script: `return {1, 999, 0, 60000000, 0}` with a decision's 2 keys and 5 "
                    "arguments", dict(suite="raw", mode="empty_decision_script"), has_rate=False),
        ceiling_row("rate-limiter-flexible 11 (RateLimiterRedis, ioredis), sequential", dict(rlf, mode="seq"),
                    usec_kw=rlf),
        ceiling_row("rate-limiter-flexible, 64 in flight", dict(rlf, mode="inflight64")),
        ceiling_row("Python limits, FixedWindowRateLimiter `hit`, sequential", dict(suite="peer", who="limits fixed_window")),
        ceiling_row("Python limits, MovingWindowRateLimiter `hit`, sequential",
                    dict(suite="peer", who="limits moving_window")),
    ]
    ceiling_table = "\n".join(ceiling)

    # ---- Redis CPU per decision ------------------------------------------------------------------
    cpu = ["| strategy | script time per decision, `usec` of commandstats (us) | vs rate-limiter-flexible | "
           "the same, one script call per decision (us) | "
           "Redis main-thread CPU per decision, sequential / pipelined (us) | commands the script runs per "
           "decision (one call per decision) |", "|---|---:|---:|---:|---:|---|"]

    def vs_rlf(u):  # best against best, as the targets compare them
        return "{:.2f}x".format(u / rlf_usec) if u and rlf_usec else "-"

    for s, label in STRATEGIES:
        cpu.append("| {} | {} | {} | {} | {} / {} | {} |".format(
            label, us(lambda rr: script_usec(rr, s)), vs_rlf(usec(s)), us(lambda rr: single_usec(rr, s)),
            us(lambda rr: server_cpu(rr, "seq", suite="throughput", strategy=s)),
            us(lambda rr: server_cpu(rr, "batch128", suite="throughput", strategy=s)), inner(s) or "-"))
    for who, label, piped in (
            ("rate-limiter-flexible", "rate-limiter-flexible (its `rlflxIncr` script)", "inflight64"),
            ("limits fixed_window", "Python limits fixed window (`incr_expire.lua`)", None),
            ("limits moving_window", "Python limits moving window (`acquire_moving_window.lua`)", None)):
        script = us(lambda rr: rr.min_usec(suite="peer", who=who))
        rowx = res.first(suite="peer", who=who) or {}
        inn = " ".join(x for x in rowx.get("inner", "").split() if not x.startswith("config"))
        cpu.append("| {} | {} | {} | {} | {} / {} | {} |".format(
            label, script, vs_rlf(res.min_usec(suite="peer", who=who)), script,
            us(lambda rr: server_cpu(rr, "seq", suite="peer", who=who)),
            us(lambda rr: server_cpu(rr, piped, suite="peer", who=who)) if piped else "-", inn or "-"))
    rb_script = us(lambda rr: rr.min_usec(suite="redis-benchmark", mode="c1"))
    cpu.append("| bare `return redis.call('INCR', KEYS[1])` (redis-benchmark) | {} | - | {} | {} / {} | incr=1.00 |".format(
        rb_script, rb_script, us(lambda rr: server_cpu(rr, "c1", suite="redis-benchmark")),
        us(lambda rr: server_cpu(rr, "P32", suite="redis-benchmark"))))
    floor = us(lambda rr: rr.min_usec(suite="raw", mode="empty_decision_script"))
    cpu.append("| floor: `return {{1, 999, 0, 60000000, 0}}` with a decision's keys and arguments | {} | {} | {} | - / {} "
               "| - |".format(floor, vs_rlf(empty_usec), floor,
                               us(lambda rr: server_cpu(rr, "empty_decision_script", suite="raw"))))
    cpu_table = "\n".join(cpu)

    # ---- Memory ----------------------------------------------------------------------------------
    mem = ["| state | key | MEMORY USAGE (bytes): mean of 100 subjects | largest |", "|---|---|---:|---:|"]
    for s, label in STRATEGIES:
        r = res.first(suite="memory", strategy=s, state="one decision")
        if r:
            mem.append("| {}, after one decision | `{}` | {} | {} |".format(
                label, r["key"], "{:.1f}".format(r["bytes_mean"]) if "bytes_mean" in r else r["bytes"],
                r.get("bytes_max", r["bytes"])))
    r = res.first(suite="memory", strategy="sliding_log", state="full limit")
    if r:
        mem.append("| sliding log at its full limit ({} units) | `{}` | {} | - |".format(r["units"], r["key"], r["bytes"]))
    for r in res.select(suite="peer_memory"):
        mem.append("| {}, {} | `{}` | {} | - |".format(r["who"], "after one decision" if r["state"] == "one decision" else
                                                      "at its full limit (1000)", r["key"], r["bytes"]))
    memory_table = "\n".join(mem)

    # ---- Growth ----------------------------------------------------------------------------------
    gr = ["| strategy | subjects | keys | fill, consume_many 128 (decisions/s) | 1 connection sequential "
          "(decisions/s) | consume_many 128 (decisions/s) | script time per decision (us) | used_memory per key "
          "(B) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
    largest = {}
    skipped = []
    for s, label in STRATEGIES:
        for r in res.select(suite="growth", strategy=s):
            if r.get("skipped"):
                skipped.append((label, r["subjects"], r["skipped"]))
                continue
            largest[s] = max(largest.get(s, 0), r["subjects"])
            keys = r.get("keys") or 0
            grown = r.get("memory_growth", r["bytes_per_subject"] * r["subjects"])  # since the FLUSHALL
            gr.append("| {} | {:,} | {:,} | {} | {} | {} | {} | {} |".format(
                label, r["subjects"], keys, fmt_rate(r["fill_rate"]) if r["fill_rate"] else "-",
                fmt_rate(r["seq_rate"]), fmt_rate(r["batch128_rate"]), fmt_us(r["usec_per_decision"]),
                "{:.0f}".format(grown / keys) if keys >= 10000 else "-"))
    growth_table = "\n".join(gr)

    fl = ["| who | requests (x limit) | admitted | Redis CPU per request (us) | decisions/s | key size (B) |",
          "|---|---|---:|---:|---:|---:|"]
    for r in flood_ours + flood_lim:
        L = r["limit"]
        fl.append("| {} | {}..{} ({:g}x..{:g}x) | {} | {} | {} | {} |".format(
            r["who"], r["from"], r["to"], r["from"] / L, r["to"] / L, r["allowed"], fmt_us(r["usec_per_call"]),
            fmt_rate(r["rate"]), r.get("bytes", "-")))
    flood_table = "\n".join(fl)

    lg = ["| strategy and quota | stage | calls | Redis CPU per call (us) | key size (B) |",
          "|---|---|---:|---:|---:|"]
    for r in res.select(suite="largest"):
        lg.append("| {} | {} | {} | {} | {} |".format(r["who"], r["stage"], r["calls"], fmt_us(r["usec_per_call"]),
                                                      r.get("bytes", "-")))
    largest_table = "\n".join(lg) if len(lg) > 2 else "(not measured in this run)"

    ls = ["| decided | decisions/s | Redis CPU per decision (us) | ratio to per request |", "|---|---:|---:|---|"]
    lease_rows = {r["who"]: r for r in res.select(suite="lease")}
    base = lease_rows.get("per request")
    for who in ("per request", "leases"):
        r = lease_rows.get(who)
        if not r:
            continue
        against = "-" if not base or who == "per request" else "{:.1f}x decisions/s, {:.3f}x Redis CPU".format(
            r["rate"] / base["rate"], r["usec_per_decision"] / base["usec_per_decision"])
        ls.append("| {} | {} | {} | {} |".format(who, fmt_rate(r["rate"]), fmt_us(r["usec_per_decision"]), against))
    lease_table = "\n".join(ls) if len(ls) > 2 else "(not measured in this run)"
    functions_table = functions_section(res)
    capacity_table = capacity_section(res)
    pool_table, pool_summary = pool_section(res)

    # ---- Client-side CPU (no I/O) ----------------------------------------------------------------
    micro_lines = []
    micro_rows = res.select(suite="micro")
    if not micro_rows and a.micro and os.path.exists(a.micro) and os.path.getsize(a.micro) > 0:
        try:
            with open(a.micro) as f:
                micro_rows = json.load(f).get("benchmarks", [])
        except ValueError:
            micro_rows = []
    if micro_rows:
        try:
            micro_lines = ["| benchmark | CPU per decision (ns) | decisions/s on one thread |", "|---|---:|---:|"]
            for b in micro_rows:
                per = b["cpu_time"]
                unit = b.get("time_unit", "ns")
                per_ns = per * {"ns": 1, "us": 1e3, "ms": 1e6}.get(unit, 1)
                if "batch128" in b["name"]:
                    per_ns /= 128
                micro_lines.append("| {} | {:.0f} | {:,.0f} |".format(b["name"].replace("BM_", ""), per_ns,
                                                                     1e9 / per_ns if per_ns > 0 else 0))
        except (ValueError, KeyError):
            micro_lines = []
    micro_table = "\n".join(micro_lines) if micro_lines else "_not measured (Google Benchmark not found)_"
    fw_client_ns = None
    for line in micro_lines:
        if line.startswith("| fixed_window |"):
            fw_client_ns = float(line.split("|")[2])

    # ---- Why the misses --------------------------------------------------------------------------
    why = []
    if misses["seq_rb"]:
        names = ", ".join("{} {:.2f}x".format(SHORT[s], r) for s, r in misses["seq_rb"])
        rtt = 1e6 / rb_c1 if rb_c1 else None
        why.append(
            "**Sequential vs `redis-benchmark -c 1` ({}).** One connection waits for each reply, so a "
            "decision costs one loopback round trip plus the script's time in Redis plus redlimit's own "
            "time in the client. `redis-benchmark -c 1` takes {} us a call, {} us of it in its one-line "
            "script. The same one-line script through redlimit's own connection (plain blocking hiredis) "
            "runs at {} calls/s, {:.2f}x redis-benchmark in this run, and a redlimit decision at {} of "
            "that rate: {}. So most of what is missing is the round trip itself, whose measure against "
            "redis-benchmark's moves from run to run on this machine (1.41x in an earlier run); the rest "
            "is the scripts' time ({}; table below), every microsecond of which is added to the round "
            "trip, and about {} us of client CPU per decision (last table).".format(
                names, fmt_us(rtt), fmt_us(rb_usec), fmt_rate(raw_seq),
                raw_seq / rb_c1 if raw_seq and rb_c1 else 0,
                "between {:.2f}x and {:.2f}x".format(
                    min(rate(s, "seq") / raw_seq for s, _ in misses["seq_rb"] if rate(s, "seq")),
                    max(rate(s, "seq") / raw_seq for s, _ in misses["seq_rb"] if rate(s, "seq")))
                if raw_seq else "?",
                ", ".join("{} {:.2f}x".format(SHORT[s], rate(s, "seq") / raw_seq) for s, _ in misses["seq_rb"]
                          if rate(s, "seq") and raw_seq),
                ", ".join("{} {} us".format(SHORT[s], fmt_us(single_usec(res, s))) for s, _ in misses["seq_rb"]),
                "{:.1f}".format(fw_client_ns / 1000) if fw_client_ns else "?"))
    if misses["seq_rlf"]:
        names = ", ".join("{} {:.2f}x".format(SHORT[s], r) for s, r in misses["seq_rlf"])
        why.append(
            "**Sequential vs rate-limiter-flexible ({}).** Same round trip on both sides; the difference "
            "is the script's Redis CPU (rate-limiter-flexible's is {} us) against the client-side cost "
            "of Node and ioredis.".format(names, fmt_us(rlf_usec)))
    if misses["conc_rlf"] or misses["conc_p32"]:
        parts = []
        if misses["conc_p32"]:
            parts.append("vs the pipelined ceiling: " + ", ".join(
                "{} {:.2f}x".format(SHORT[s], r) for s, r in misses["conc_p32"]))
        if misses["conc_rlf"]:
            parts.append("vs rate-limiter-flexible with 64 in flight: " + ", ".join(
                "{} {:.2f}x".format(SHORT[s], r) for s, r in misses["conc_rlf"]))

        def piped_cpu(s):  # the least main-thread CPU per decision of any mode that pipelines
            vals = [r["server_cpu_us_per_decision"] for r in res.select(suite="throughput", strategy=s)
                    if r.get("mode") not in ("seq", "pool2", "pool4", "pool8") and r.get("server_cpu_us_per_decision")]
            return min(vals) if vals else None

        bounds = []
        for s, _ in STRATEGIES:
            c = piped_cpu(s)
            b, _m = best_concurrent(s)
            if c and b:
                bounds.append("{} {} (best mode: {:.0f}% of it)".format(SHORT[s], fmt_rate(1e6 / c), 100.0 * b * c / 1e6))
        rb_piped = res.min_usec(key="server_cpu_us_per_decision", suite="redis-benchmark", mode="P32")
        rlf_piped = res.min_usec(key="server_cpu_us_per_decision", suite="peer", who="rate-limiter-flexible",
                                 mode="inflight64")
        why.append(
            "**Best concurrent mode ({}).** Once requests are pipelined, Redis's one thread is the "
            "bottleneck: it can decide at most 1,000,000 / (its CPU time per decision, socket work "
            "included) a second. With the least main-thread CPU per decision measured in any pipelined "
            "mode, that bound is: {}. The "
            "pipelined ceiling runs a one-line INCR script at {} us of main-thread CPU per call; a "
            "`consume_many` batch shares one script call's fixed cost over up to 256 decisions, but "
            "each decision still reads its state, writes it back with a TTL and returns five integers. "
            "rate-limiter-flexible with 64 in flight reaches {} decisions/s at {} us a decision; 5x "
            "that is {} decisions/s ({:.1f}x the bound of our cheapest). On this {}-core machine the "
            "client (building and decoding the batches) also shares the cores with Redis.".format(
                "; ".join(parts), "; ".join(bounds) or "-", fmt_us(rb_piped), fmt_rate(rlf_64),
                fmt_us(rlf_piped), fmt_rate(5 * rlf_64) if rlf_64 else "-",
                (5 * rlf_64) / max(1e6 / piped_cpu(s) for s, _ in STRATEGIES if piped_cpu(s))
                if rlf_64 and any(piped_cpu(s) for s, _ in STRATEGIES) else 0,
                os.cpu_count()))
    if misses["cpu"]:
        names = ", ".join("{} {:.2f}x".format(SHORT[s], r) for s, r in misses["cpu"])
        floor_ratio = "{:.2f}x".format(empty_usec / rlf_usec) if empty_usec and rlf_usec else "?"
        why.append(
            "**Redis CPU per decision vs rate-limiter-flexible ({}).** rate-limiter-flexible's script "
            "runs `{}` per decision and returns two numbers. Ours, a call per decision: fixed window `{}`; "
            "token bucket `{}`; leaky bucket `{}`, and in a `consume_many` batch one `MGET` for the whole "
            "batch and one write per admitted request (`SET … KEEPTTL` inside a window the fixed window "
            "has started, or a bucket's lease; `PSETEX` otherwise: a new window, a new lease, a new "
            "subject). What is left per decision is that write, the script's Lua arithmetic and the "
            "five integers of its decision; a script that "
            "touches nothing and returns a decision costs {} us a call ({} of rate-limiter-flexible's "
            "whole script).".format(
                names, rlf_inner.replace("config|resetstat=0.00", "").strip(), inner("fixed_window"),
                inner("token_bucket"), inner("leaky_bucket"), fmt_us(empty_usec), floor_ratio))
    if misses["flood"]:
        why.append(
            "**Flooded sliding log ({:.2f}x limits' moving window).** Both stay flat as the flood grows "
            "(the table shows it): rejected requests record nothing. A rejected request costs limits one "
            "`LINDEX`; ours, when it is a call of its own, the marker's `GET`, the newest and the "
            "oldest live entry, `ZCARD`, `ZCOUNT` and a rank read for the exact retry_after. Inside a batch, "
            "repeated rejections of one subject are answered from the script's own table. The opt-in "
            "local reject cache (`Options::local_reject_cache`) takes such a flood off Redis "
            "altogether.".format(misses["flood"][0][1]))
    if misses["memory"]:
        rlf_mem = (res.first(suite="peer_memory", who="rate-limiter-flexible") or {}).get("bytes")
        why.append(
            "**Memory per subject ({}).** The state carries the configuration it was written under "
            "(20 bytes for a fixed window, 28 for a bucket with its lease; see the memory section below), which puts "
            "its value in a 48-byte block: 104 B a subject, where 0.2's untagged 12-byte state took 88 B. "
            "rate-limiter-flexible stores a small integer under a short key: {} B.".format(
                ", ".join("{} {:.1f} B".format(SHORT[s], b) for s, b in misses["memory"]), rlf_mem or "?"))
    why_text = "\n\n".join(why) if why else "Every target was met in this run."

    async_note = ""
    if missing_async:
        async_note = ("\nThe asynchronous rows are **missing**: {}.\n".format(missing_async[0]["missing"]))

    growth_note = ""
    if skipped:
        growth_note = "\nSizes left out to keep the run within its time budget: " + "; ".join(
            "{} at {:,} subjects ({})".format(lbl, n, why_) for lbl, n, why_ in skipped) + ". "
    if largest:
        growth_note += "Largest size measured: " + ", ".join(
            "{} {:,}".format(SHORT[s], n) for s, n in largest.items()) + ".\n"

    if growth_note and not growth_note.startswith("\n"):
        growth_note = "\n" + growth_note
    doc = """# Performance

Generated by `scripts/bench.sh` from one run: every number below comes from the same redis-server
(and, for the cluster section, the same local cluster), started by the script for this run, and the
same machine, so the ratios compare like with like. Do not edit by hand: run the script again.

{machine}

How to read it: **decisions/s** is wall-clock throughput of `consume` (or `consume_many`) calls,
nearly all admissions (every strategy allows 1000 per minute per subject and the requests cycle over
10,000 subjects), so each is a full read-and-write of the subject's state. **Redis CPU per decision**
is `usec` of `cmdstat_fcall` (redlimit calls its scripts as Redis Functions; `cmdstat_evalsha` for the peers) in `INFO commandstats` divided by the decisions made, after a
`CONFIG RESETSTAT`. The machine has {cores} cores: Redis's single thread and the client compete for
them, so every client-side microsecond and every script microsecond shows up in the throughput. The
other workloads on the machine during the run show in the load average above; every throughput row
was repeated and the best repetition kept. {spreads}

## Targets

{targets}

### Why the misses

{why}

## Targets of issue 13

The figures issue 13 asks for, measured side by side in this run, from the same rows as the tables
below. Each row: redlimit's figure / the reference's, each with its spread ({reps});
the ratio of the two bests, with the lowest–highest of each repetition's own ratio in brackets (both
sides are measured in the same repetition); the verdict reads the ratio of the bests, as the issue-4
table above does. A figure that could not be measured says why and counts as a MISS. Script time is
`usec` of commandstats per decision (the table "Redis CPU per decision"); rate-limiter-flexible's
script is one call per decision in both of its modes, its lowest kept. Target 3 names no strategy, so
every strategy is held to it. Target 7's pipelined figure is the main-thread CPU per decision in
`consume_many` 128, the "pipelined" column of "Redis CPU per decision".

{issue13}

{issue13_summary}

## Decisions per second

{throughput_spreads}

{throughput}
{async_note}
## Redis Cluster (3 masters) vs one server

{cluster}

### Through a failover

{failover}

## The ceiling and the peers

{ceiling}

## Redis CPU per decision

Each script's time on Redis's thread (`usec` of `cmdstat_fcall`, or `cmdstat_evalsha` for the peers, over the decisions; the lowest of
all the runs of that script, whatever the mode: for redlimit that is a `consume_many` mode, where one
script call decides up to 256 requests and its fixed cost is shared; the next column is the lowest
of the modes where every decision is a call of its own), the commands it runs per decision
(`INFO commandstats` counts the commands a script calls), and the whole main thread's CPU time per
decision (`used_cpu_user_main_thread + used_cpu_sys_main_thread`): that one includes reading and
writing the socket, which dominates when each request comes alone (sequential) and is shared out
when they come pipelined (`consume_many` 128 for redlimit, 64 in flight for rate-limiter-flexible).
Commandstats' `usec` is wall-clock time: it grows when another process preempts Redis, which the
main-thread CPU time does not. {cpu_spreads}

{cpu}

## Redis commands per decision

What each script calls (`redis.call`) for one decision, counted by `INFO commandstats` and held to
these bounds by `tests/integration/command_count_test.cpp` (which prints the table). One call decides
one request, or a whole `consume_many` batch (one script call for up to 256 requests on one server):
the read of every string state (or, for the sliding log, every block marker) is then one command,
and each admission is one write. Every state but the sliding log's holds its subject's block itself
(`docs/keys.md`, Blocks), so their decisions read one key: a fixed window and the buckets made an
`MGET` of state and marker until 0.3, and a sliding window and a policy a `GET` of the marker
before their `HGETALL` (4 commands, 3 for the next consumes, 2 for a peek) until this change.

| strategy | first consume | next consumes | peek | per decision in a batch of 128 subjects |
|---|---|---:|---:|---:|
| fixed window | 2: `GET` state, `PSETEX` | 2 (the write `SET … KEEPTTL`: the window's TTL holds) | 1 | 1.01 |
| token bucket, leaky bucket (meter, shaper) | 2: `GET` state, `PSETEX` | 2 (the write `SET … KEEPTTL` within the key's lease) | 1 | 1.01 |
| sliding window, and a policy of any number of limits | 3: `HGETALL`, one `HSET` for every limit's bucket, `PEXPIRE` | 2 (no `PEXPIRE` while every limit's newest bucket is its current one: the TTL set with it holds) | 1 | 3.00 (128 new subjects) |
| sliding log | 4: `GET` marker, `ZRANGE` newest, `ZADD`, `PEXPIRE` | 4 (`ZRANGEBYSCORE` of the oldest live entry joins; `PEXPIRE` only by the first admission of each half-second, the trim only every `limit / 8` units) | 3 | 3.01 |

A policy wrote one `HINCRBY` per limit before (6 commands for 3 limits, 5.01 per decision in a
batch); one `HSET` now writes them all. `TIME` is called only with `TimeSource::redis`; with the
client's clock (the default) the time comes in `ARGV`.

## Memory per subject

`MEMORY USAGE key SAMPLES 0` of a subject's key after its first decision (resource `api`, subjects
`u0000001` to `u0000100` decided one after the other: the mean and the largest); the key's name is
part of what is counted. The peers under their default key names (one subject).

`MEMORY USAGE` adds three allocations: the keyspace's dict entry (24 B), the key's name and the
value, each rounded up to jemalloc's size classes (16, 32, 48, 64 B...). The key
`redlimit:{{api|u0000001}}:tb` (26 characters) takes a 32-byte block. The fixed window's and the
buckets' states are packed integers that also carry the configuration they were written under, so
that a deploy that changes a limit never misreads them (`pack_window` and `pack_bucket` in
`lua/helpers.lua`; docs/algorithms.md, Reconfiguration): 20 bytes for a fixed window (start, used,
window), 28 for a bucket (time, whole units, fraction, unit, and the lease that says how long its
key lives: docs/algorithms.md, Token bucket). Either is an embedded string of at most
16 + 3 + 28 + 1 = 48 bytes, a 48-byte block: 24 + 32 + 48 = 104 B. The untagged 12-byte state of
version 0.2 fitted a 32-byte block (88 B); the tag costs 16 B a subject.

{memory}

## How cost grows with the number of subjects

Every strategy at 1000 per day here (the policy keeps its three limits), so that no subject's state
expires during the run; subjects filled with `consume_many` batches of 128, then decisions on random
existing subjects, one connection sequential and in batches of 128. `used_memory` per key is the
growth of Redis's `used_memory` (less its clients' buffers) since a `FLUSHALL`, divided by the keys:
unlike `MEMORY USAGE` it includes the keyspace's hash tables and the entry in the table of expiring
keys (left out below 10,000 keys, where allocator noise dominates). At the rates of the throughput
runs (1000 per minute) a bucket's key expires 60 ms after its last decision and a window's at the
window's end: memory a limiter never spends on idle subjects. {once}
{growth_note}
{growth}

## A sliding log flooded at 100x its limit

One subject, limit L per 10 minutes (nothing leaves the window during the run), hit 100 L times:
Redis CPU per request in each stage (`consume_many` batches of 100: redlimit; one call a request: limits). Rejected requests record nothing, so the work stays bounded by the
limit, never by the flood. Python limits' moving window under the same flood for comparison. {once}

{flood}

## The largest quotas: work bounded by the requests, never the cost

Each strategy at the top of the accepted range (2^40 units per ten years; the sliding log also at a
million a day), Redis CPU per script call from `INFO commandstats`: requests of cost 1 over 100
subjects; one request of the whole limit, then requests of cost 1 to 7 that are rejected; and a
million-a-day sliding log holding thousands of requests of random cost, peeked with costs that must
wait (the wait is a binary search over the log's ranks). The big products of these quotas go
through the scripts' exact `muldiv` (docs/algorithms.md); a decision's work stays within a small
factor of the everyday quotas' above, whatever the cost. (0.2 refused most of these quotas, and its
sliding log spent 3.5 s inside Redis on one `consume(1'000'000)`.) {once}

{largest}

## Quota leases: a hot subject decided in-process

One subject of a fixed window whose limit is far above what two threads can offer, decided per
request and through `redlimit::Leases` ([leases.md](leases.md)) for the same time: decisions a
second and Redis CPU per decision. Targets (issue 14): at least 20x the decisions a second, at
most 0.05x the Redis CPU per decision. {once}

{lease}

## Redis Functions against EVALSHA

Each strategy's script time on Redis's thread per decision (`usec` of `cmdstat_fcall` or
`cmdstat_evalsha` over the decisions), called as a function of redlimit's library (the default on
Redis >= 7.0 and Valkey: helpers defined once, when the library loads) and as EVALSHA of the same
script (`Options::redis_functions = false`, and the path on older servers), one decision a call and
128 a call (`consume_many`), on the same server in the same run: the median of the repetitions, and
their range.

{functions}

## Capacity planning

What one Redis core decides per second, from the main thread's CPU per decision measured above
(`used_cpu_user_main_thread + used_cpu_sys_main_thread` over the decisions: socket work included),
planned at 70% of the core to leave room for spikes, replication and persistence; and the Redis
Cluster masters that would take for 1M, 10M and 100M decisions a second, assuming the decisions
spread evenly over the masters' slots (subjects are hashed) and each master on a core of this
machine's speed. `seq` is one call at a time on a connection (the worst case: a socket read and
write per decision), `threads8` eight threads calling `consume()` on the default pool of 4 (the
calls made while two are on their way share the next script call, `Options::share_script_calls`),
`async64` 64 calls in flight (the calls of one loop turn
sharing a script call, `Options::share_script_calls`), `batch128` `consume_many` of 128. Replicas add no decisions (every decision writes); they double the cores for the same figure.

{capacity}

## Sizing the connection pool

Eight threads calling `consume()`, as a service's workers do, on a pool of 8 (a connection a
thread) and on the default pool of 4, both sharing (the defaults): `Options::share_script_calls`
lets as many script calls of a strategy be on their way at once as the pool has connections, and
the calls made meanwhile go together as one script call (`include/redlimit/detail/sync_lane.hpp`);
`PoolOptions::coalesce` sends the commands queued for the pool in one write. Then the pool of 4
with at most 2 script calls out (`Options::shared_call_flights = 2`), and the pool of 4 with
sharing off (a connection leased for each call's round trip, a script call per `consume`). Each
cell: decisions/s (the best of the repetitions), its ratio to the pool of 8, and Redis's
main-thread CPU per decision. {pool_summary} On the pool of 8 no call waits to share (a connection
a thread); on the pool of 4 the four calls beyond the connections share, which cuts Redis's CPU per
decision (a socket read, a script run and a reply for several calls); with 2 calls out, more share
each script call, for the least Redis CPU, and each caller may wait up to a round trip for a
flight. So: keep sharing on, and size the pool to the threads that call at the same moment when
latency matters most; a smaller pool, or a smaller `shared_call_flights`, when Redis's CPU is what
runs out.

{pool_table}

## Client-side CPU per decision

What redlimit itself spends in the calling thread per decision (input checks, key building, the
command's argv, the circuit breaker, decoding the reply, counters), measured with Google Benchmark
against a connection that answers with a canned reply: no I/O at all (`benchmarks/micro_bench.cpp`).
The `memory_*` rows are the in-memory backend (`RateLimiter::in_memory()`, also the `fallback`)
deciding for real, one thread: `memory_<strategy>` through the limiter, `memory_command_<strategy>`
the backend alone (a prepared command straight to `MemoryConnection`), `_batch128` per decision of a
`consume_many` of 128.

{micro}

## Reproduce

```
scripts/bench.sh                   # full run, writes this file
BENCH_QUICK=1 scripts/bench.sh     # about a minute and a half, smaller counts
BENCH_PIN=1 scripts/bench.sh       # redis-server on CPU 0, clients on CPU 1
BENCH_CLUSTER=0 scripts/bench.sh   # without the Redis Cluster rows
```

The drivers: `benchmarks/redlimit_bench.cpp` (redlimit; `--suite cluster --url redis-cluster://...`
for the cluster rows, on a cluster from `scripts/cluster.sh`), `benchmarks/peers/rlf_bench.js`
(rate-limiter-flexible), `benchmarks/peers/limits_bench.py` (Python limits), `redis-benchmark` for
the ceiling; `benchmarks/report.py` writes this file.

Comparing two versions of the Lua scripts needs a steadier figure than CPU time, which moves by up
to 30% between runs on a shared machine: `scripts/instructions.sh [BENCH] [STRATEGIES] [MODE]`
counts, with callgrind, the instructions Redis spends inside FCALL per decision (its own
redis-server under valgrind; repeatable to about 1%). It is not part of this file. Its strategy
`peer` is a Function doing what rate-limiter-flexible's script does per call, so that
`scripts/instructions.sh build-bench/benchmarks/redlimit_bench peer,fixed_window seq` gives target 1's
ratio in instructions.
""".format(machine=machine_section(a, res), cores=os.cpu_count(), targets=targets_table, why=why_text,
           spreads=spread_note(res, "Each figure in the tables of decisions per second, the cluster, the ceiling and "
                                     "Redis CPU per decision"), reps=repetitions(res),
           issue13=issue13_table, issue13_summary=issue13_summary, throughput_spreads=spread_note(res, "Each cell"),
           cpu_spreads=spread_note(res, "Each figure of the table"),
           once="Measured once in the run (not repeated): no spread.",
           throughput=throughput_table, async_note=async_note, cluster=cluster_section,
           failover=report_failover.section(res, cluster_absent(a)), ceiling=ceiling_table, cpu=cpu_table,
           memory=memory_table, growth_note=growth_note, growth=growth_table, flood=flood_table, largest=largest_table, lease=lease_table,
           functions=functions_table, capacity=capacity_table, micro=micro_table, pool_table=pool_table,
           pool_summary=pool_summary)
    with open(a.out, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
