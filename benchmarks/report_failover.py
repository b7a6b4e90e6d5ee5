"""The section "Through a failover" of docs/performance.md (report.py imports it): the rows of
redlimit_bench's failover suite (benchmarks/bench_failover.cpp), one per mode, each a timeline of
the decisions made in 100 ms steps while a replica took over its master, planned (CLUSTER FAILOVER)
or not (the master stopped)."""

LABELS = {
    "batch128": "planned: consume_many 128, 1 thread",
    "async64": "planned: async, 64 in flight",
    "batch128_stop": "master stopped: consume_many 128, 1 thread",
    "async64_stop": "master stopped: async, 64 in flight",
}


def _k(x):
    """A rate in decisions/s, short."""
    if x >= 1e6:
        return "{:.2f}M".format(x / 1e6)
    if x >= 1e3:
        return "{:.1f}k".format(x / 1e3)
    return "{:.0f}".format(x)


def figures(row):
    """What one failover row says, as numbers: rates in decisions/s, times in ms from the command."""
    step = row["step_ms"]
    per_s = 1000.0 / step
    steps = [int(s) for s in row.get("steps", "").split()]
    cmd = row["failover_at_ms"]
    promoted = row["promoted_at_ms"]
    # Step i covers (i * step, (i + 1) * step] ms from the start; the command went at the end of
    # the step that crossed 2 s, so the steps before it are the steady state.
    first_after = int(round(cmd / step))
    before = steps[:first_after]
    steady = sum(before) / len(before) * per_s if before else 0
    end_of_gap = len(steps) if promoted < 0 else min(len(steps), int(round(promoted / step)) + 10)
    during = steps[first_after:end_of_gap]
    low = min(during) * per_s if during else 0
    below_half = sum(step for s in steps[first_after:] if s * per_s < steady / 2)
    tail = steps[-10:] if promoted >= 0 else []
    after = sum(tail) / len(tail) * per_s if tail else 0
    return {
        "steady": steady,
        "promotion_ms": promoted - cmd if promoted >= 0 else None,
        "low": low,
        "below_half_ms": below_half,
        "after": after,
        "decided": row.get("decided", 0),
        "failed": row.get("failed", 0),
        "errors": row.get("errors", ""),
        "timeline": [s * per_s for s in steps[max(0, first_after - 3):end_of_gap]],
    }


def _label(row):
    return LABELS.get(row["mode"], row["mode"])


def _tables(res, rows):
    """What the section lists of the failover rows `rows`: the table's lines, each row's timeline, the
    errors of its failed calls, and its promotion time."""
    t = ["| failover, mode | before (decisions/s) | replica promoted after | lowest 100 ms, as decisions/s | "
         "time below half the rate before | calls failed | last second, vs before |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    lines, notes, promos = [], [], []
    for r in rows:
        f = figures(r)
        promo = "{:.0f} ms".format(f["promotion_ms"]) if f["promotion_ms"] is not None else "not within 10 s"
        promos.append("{} ({})".format(promo, _label(r)))
        vs = "{:.2f}x".format(f["after"] / f["steady"]) if f["steady"] and f["after"] else "-"
        t.append("| {} | {} | {} | {} | {} ms | {:,} of {:,} | {} |".format(
            _label(r), _k(f["steady"]), promo, _k(f["low"]), f["below_half_ms"],
            f["failed"], f["decided"] + f["failed"], vs))
        lines.append("- {}: {}".format(_label(r), " ".join(_k(x) for x in f["timeline"])))
        if f["errors"]:
            notes.append("- {}: {}".format(_label(r), f["errors"]))
    for r in res.select(suite="failover"):
        if "missing" in r:
            t.append("| {} | {} | | | | | |".format(_label(r), "missing: " + r["missing"]))
    return t, lines, notes, promos


def section(res, absent):
    """The section's text, or why it was not measured (`absent`)."""
    rows = [r for r in res.select(suite="failover") if "steps" in r]
    if not rows:
        return "_Not measured in this run: {}._".format(absent)
    t, lines, notes, promos = _tables(res, rows)
    return """The fixed window on the same cluster, after the throughput rows: `redlimit_bench --suite failover`
(`benchmarks/bench_failover.cpp`) runs the load for 2 s, starts a failover of one master, and goes on
until 3 s after the replica answers `ROLE` as a master (polled every 100 ms, so the promotion time is
rounded up to it).

- **Planned**: `CLUSTER FAILOVER` sent to the replica, as an upgrade makes. The old master pauses its
  writers until the replica has caught up with it, the replica takes over, and each client's next
  call to its slots meets MOVED and follows it. The second planned failover hands the slots back.
- **Master stopped** (unplanned): the master gets `SIGSTOP`, a hung host; the cluster marks it failed
  after `cluster-node-timeout` (1 s here) and promotes its replica; the calls waiting on it fail at
  their deadline, and the client finds the new owner by reading the slot map again (docs/cluster.md,
  "Async on a cluster"). The old master is let go at the end of its row and rejoins as a replica.
  Each stopped master is another shard's.

The options are the defaults: `OnFailure::raise`, a 1 s deadline, the breaker of 5 failures with its
1 s cooldown. One run each, not repeated.

{table}

The rate in each 100 ms step (decisions/s), from 0.3 s before the failover to 1 s after the
promotion:

{lines}
{errors}
What it shows. The promotion took {promos} in this run: a planned one as long as the replica needs
to catch up (on these 2 cores, with 6 nodes and the client on them, a replica under load can fall
behind by seconds), an unplanned one `cluster-node-timeout` and an election. While a master is
paused or stopped, the calls that reach it wait: a batch holds requests of every master, and 64 calls
in flight soon all wait on that one, so the whole rate falls, not only a third of it. A wait longer
than the call's deadline (`Options::command_timeout`) fails the calls waiting; the master's breaker
then opens, and under `raise` every batch with requests of that master throws (`fail_open`,
`fail_closed` and `fallback` answer those requests and decide the others; docs/cluster.md, "One
master down"). Between the moment the cluster marks a stopped master failed and its replica's
promotion, every master answers `CLUSTERDOWN` (`cluster-require-full-coverage`): retried within
each call's deadline, then an outage, which counts against that master's breaker too. After the
promotion, a call that a breaker short-circuits has the slot map read again (an async call's
without blocking, on the map the `AsyncCluster` shares with the limiter), and the slots go to the
new master, through a breaker of its own, at once. A planned failover that ends inside
the deadline costs no call at all.""".format(table="\n".join(t), lines="\n".join(lines), promos=", ".join(promos) or "-",
                 errors=("\nWhat the failed calls were:\n\n" + "\n".join(notes) + "\n") if notes else "")
