"""The section "Redis Cluster (3 masters) vs one server" of docs/performance.md (report.py imports
it): the cluster suite's rows beside the one server's from the same run, Redis's side of them (CPU
per decision, each master's share), and why a run has no cluster rows (cluster_absent)."""
import os
from collections import defaultdict

from report_common import (MODES, SHORT, STRATEGIES, fmt_k, fmt_rate, fmt_us, best_mode, rate_of, server_cpu,
                           spread_note, with_spread)

# Every mode: the async ones run over AsyncCluster (a row with "missing" says why one could not run).
# A cluster's batches, a script call per slot (Options::batch_per_master off): the A/B of one call per master.
CLUSTER_MODES = MODES + [("batch128_per_slot", "consume_many, 128, a script call per slot")]
# What a cluster-only mode is beside on the one server (where it is the same thing).
ONE_SERVER_TWIN = {"batch128_per_slot": "batch128"}


def cluster_absent(a):
    """Why a run has no cluster rows, from bench.sh's --cluster."""
    return {
        "skipped": "the cluster was not run (`BENCH_CLUSTER=0`)",
        "failed": "the local cluster did not start (`scripts/cluster.sh start` failed; the run's log says why)",
    }.get(a.cluster, "no cluster rows in the results")


def _cell(res, cluster_figure, c, v, cm="", vm=""):
    """Cluster / one server = ratio; the cluster's figure with its spread (the one server's is in
    the table above, the same figure)."""
    if c is None and v is None:
        return "-"
    times = "{:.2f}x".format(c / v) if c and v else "-"
    return "{}{} / {}{} = {}".format(cm, with_spread(res, cluster_figure, short=fmt_k), vm,
                                     fmt_rate(v) if v else "missing", times)


def _rates_table(res):
    """The table of decisions/s, cluster / one server, a row per mode the cluster ran and one of the
    best concurrent modes; with the ratios of each row (mode, or "best" -> ratios over the strategies)."""
    def cl_rate(sid, mode):
        return rate_of(res, sid, mode, "cluster")

    ran = [(m, lbl) for m, lbl in CLUSTER_MODES if any(cl_rate(s, m) for s, _ in STRATEGIES)]
    t = ["| mode | " + " | ".join(SHORT[s] for s, _ in STRATEGIES) + " |", "|---|" + "---:|" * len(STRATEGIES)]
    ratios = defaultdict(list)  # mode -> ratios over the strategies
    for mode, label in ran:
        cells = []
        for s, _ in STRATEGIES:
            c, v = cl_rate(s, mode), rate_of(res, s, ONE_SERVER_TWIN.get(mode, mode))
            cells.append(_cell(res, lambda rr: rate_of(rr, s, mode, "cluster"), c, v))
            if c and v:
                ratios[mode].append(c / v)
        t.append("| {} | {} |".format(label, " | ".join(cells)))
    cells = []
    for s, _ in STRATEGIES:
        (c, cm), (v, vm) = best_mode(res, s, CLUSTER_MODES, "cluster"), best_mode(res, s, CLUSTER_MODES)
        cells.append(_cell(res, lambda rr: best_mode(rr, s, CLUSTER_MODES, "cluster")[0], c, v,
                           "{}: ".format(cm or "-"), "{}: ".format(vm or "-")))
        if c and v:
            ratios["best"].append(c / v)
    t.append("| **best of these concurrent modes** | {} |".format(" | ".join(cells)))
    return "\n".join(t), ratios


def _server_table(res):
    """Redis's side: main-thread CPU per decision (summed over the masters) and how the decisions
    spread over the masters."""
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

    sv = ["| strategy | Redis main-thread CPU per decision, sequential: cluster / one server (us) | the same, "
          "consume_many 128 (us) | the cluster's, consume_many 128 with a script call per slot (us) | "
          "each master's share of the decisions |", "|---|---:|---:|---:|---:|"]
    for s, label in STRATEGIES:
        sv.append("| {} | {} / {} | {} / {} | {} | {} |".format(
            label, cpu("cluster", s, "seq"), cpu("throughput", s, "seq"),
            cpu("cluster", s, "batch128"), cpu("throughput", s, "batch128"),
            cpu("cluster", s, "batch128_per_slot"), master_shares(s)))
    return "\n".join(sv)


def _summary(ratios):
    """Cluster / one server over the strategies, for the modes the summary names that were measured."""
    def span(mode):
        r = ratios.get(mode)
        if not r:
            return None
        return "{:.2f}x".format(r[0]) if len(r) == 1 else "{:.2f}x to {:.2f}x".format(min(r), max(r))

    labels = {"seq": "sequential on 1 connection", "pool8": "a pool of 8 threads", "batch128": "consume_many 128",
              "best": "the best concurrent mode"}
    return "; ".join("{}: {}".format(labels[m], span(m)) for m in ["seq", "pool8", "batch128", "best"] if span(m))


def _why(ratios, masters):
    """Why the cluster is not faster on one machine (when its median ratio is below 1), or the reminder
    that its gain needs machines of its own."""
    every = [x for m, r in ratios.items() if m != "best" for x in r]
    cores = os.cpu_count()
    if every and sorted(every)[len(every) // 2] < 1:
        return (
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
    return (
        "On this {cores}-core machine the {m} masters, their {m} replicas and the client share the same cores; "
        "a cluster's real gain comes from giving each master a machine of its own.").format(
            cores=cores, m=masters or 3)


def cluster_report(res, a):
    """The section "Redis Cluster (3 masters) vs one server": the cluster suite's rows beside the one
    server's, from the same run."""
    if not res.select(suite="cluster"):
        return "_Not measured in this run: {}._".format(cluster_absent(a))
    table, ratios = _rates_table(res)
    masters = max([r.get("masters", 0) for r in res.select(suite="cluster")] or [0])
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

{server_table}""".format(m=masters or 3, table=table, async_note=async_note, summary=_summary(ratios) or "-",
                         why=_why(ratios, masters), server_table=_server_table(res),
                         spreads=spread_note(res, "The cluster's figure"))
