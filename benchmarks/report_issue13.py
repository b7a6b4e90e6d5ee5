"""Issue 13's targets in docs/performance.md (report.py imports it): the table of its targets, the
line that counts its passes, and the text that says what bounds the targets missed."""
import os
from collections import defaultdict, namedtuple

from report_common import RLF, SHORT, best_mode, fmt_k, fmt_rate, fmt_us, inner_commands, single_usec, with_spread
from report_targets import ALL, CPU_TARGET, meets, ratio

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
    Target("7", "the same, with one shared script call out at a time (`Options::shared_call_flights = 1`)", ALL,
           mode_side("throughput", "threads8_flights1", "server_cpu_us_per_decision"),
           mode_side("throughput", "batch128", "server_cpu_us_per_decision"), 2.0, True, USEC),
    Target("7", "the same, each call held up to 200 us for more callers (`Options::shared_call_linger`)", ALL,
           mode_side("throughput", "threads8_linger", "server_cpu_us_per_decision"),
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


def why_target7(res):
    """What bounds target 7, from this run's rows: the main thread's work per request that arrives
    alone, which eight callers can share at most eight ways. '' when a row it needs is missing."""
    parts, floors = [], []
    for sid in ALL:
        kw = dict(suite="throughput", strategy=sid)
        seq_cpu = res.min_usec(key="server_cpu_us_per_decision", mode="seq", **kw)
        seq_script = res.min_usec(mode="seq", **kw)
        piped = res.min_usec(key="server_cpu_us_per_decision", mode="batch128", **kw)
        rows = [r for r in res.select(mode="threads8", **kw) if r.get("script_calls")]
        if not (seq_cpu and seq_script and piped and rows) or seq_cpu <= seq_script:
            return ""
        shared = max(r["ops"] / r["script_calls"] for r in rows)
        alone = seq_cpu - seq_script  # a request's socket read, its reply and a turn of the event loop
        parts.append("{} {} us ({:.1f} decisions a script call)".format(SHORT[sid], fmt_us(alone), shared))
        floors.append("{} {:.2f}x".format(SHORT[sid], (alone / 8 + piped) / piped))
    return (
        "**What bounds target 7.** Redis's main thread spends, on each request that arrives alone, its "
        "script's time and then the work of the request itself: reading it off the socket, writing the "
        "reply, a turn of its event loop. That work is the sequential row's main-thread CPU per "
        "decision less its script time (the lowest of each over the repetitions), and it hardly depends "
        "on how many decisions the script call carries: {}; in brackets, how many decisions the "
        "eight threads put in each script call in their best repetition (`Options::share_script_calls`). "
        "Eight callers can share a call at most eight ways, so even then a decision carries an eighth "
        "of that work on top of the pipelined figure, a floor for the ratio of (work / 8 + pipelined) / "
        "pipelined: {}. Where that floor is above 2.0x, no sharing among eight threads meets the target "
        "on this machine; what would is a cheaper socket turn (a machine whose system calls cost less "
        "than this virtual machine's), or more callers per call than threads: `consume_many`, or "
        "`consume_async`, whose calls of a loop turn share one.".format("; ".join(parts), ", ".join(floors)))


def _batch_rows(res):
    """Each strategy's `consume_many` 128 row with the least script time per decision (None when the
    run has none): the figure and the commands the paragraphs below quote, looked up once."""
    rows = {}
    for sid in ALL:
        got = [r for r in res.select(suite="throughput", strategy=sid, mode="batch128") if r.get("usec_per_decision")]
        rows[sid] = min(got, key=lambda r: r["usec_per_decision"]) if got else None
    return rows


def _batched(rows, sid):
    row = rows[sid]
    return "{} {} us (`{}`)".format(SHORT[sid], fmt_us(row["usec_per_decision"]), inner_commands(row))


def _capital(text):
    return text[:1].upper() + text[1:]


def _why_script_time(res, rows, rlf, missed):
    """Where the script time of the strategies that miss target 3 goes (they are the ones that miss
    targets 2 and 5 too, where they do), and what would close it."""
    said = [
        "**Where the script time goes (targets 2, 3 and 5).** {} miss target 3, whose bound is {} us "
        "(half of rate-limiter-flexible's {} us). Their script time is their commands. In "
        "`consume_many` 128, script time per decision and the commands per decision counted in the "
        "same rows: {}; against {}.".format(
            _capital(", ".join(SHORT[s] for s in missed)), fmt_us(rlf / 2), fmt_us(rlf),
            "; ".join(_batched(rows, s) for s in missed), _batched(rows, "fixed_window"))]
    near = [s for s in missed if rows[s]["usec_per_decision"] / rlf <= 0.6]
    if near:
        said.append(
            "{} miss it by a fifth or less: a decision of theirs reads its state and writes it back, two "
            "commands and the Lua between them, where the fixed window's `HINCRBY` reads and writes in "
            "one.".format(_capital(", ".join(SHORT[s] for s in near))))
    if any(s.startswith("sliding_log") for s in missed):
        said.append(
            "A sliding log reads its newest entry and the oldest one still in its window and adds a "
            "member with `ZADD`: sorted-set commands, each dearer to Redis than a hash field's, and the "
            "floor of a log exact to the microsecond. The same limit within a bucket's error, a "
            "sliding window of ten buckets, costs {} us.".format(
                fmt_us(rows["sliding_window_p10"]["usec_per_decision"])))
    if "policy3" in missed:
        said.append(
            "A policy of 3 limits reads every live bucket of its limits (`HGETALL`), writes them with "
            "one `HSET` and sums them in Lua ({} us a single decision: target 2 holds it to 1.3x "
            "rate-limiter-flexible's); a running sum per limit would free its decision from its "
            "buckets (docs/algorithms.md, \"Work per decision\"), with a state layout that earlier "
            "versions, during a rolling deploy, could not read.".format(fmt_us(single_usec(res, "policy3"))))
    said.append(
        "Target 5 holds the best concurrent mode to a pipelined one-line script, where Redis's CPU "
        "per decision bounds these strategies (\"Why the misses\", above).")
    return " ".join(said)


def why_issue13_misses(res):
    """Why targets 2, 3, 5 and 6 miss where they do, from this run's rows: the script time and the
    commands of a batched decision of each strategy that misses target 3, and the cluster's cores.
    '' when a row it needs is missing."""
    rlf, rows = res.min_usec(suite="peer", who=RLF), _batch_rows(res)
    if not rlf or not all(rows[s] for s in ("fixed_window", "sliding_window_p10", "policy3")):
        return ""
    missed = [s for s in ALL if rows[s] and rows[s]["usec_per_decision"] / rlf > 0.5]
    paras = [_why_script_time(res, rows, rlf, missed)] if missed else []
    slower = [s for s in ALL if (res.best_rate(suite="cluster", strategy=s, mode="batch128") or 0) <
              (res.best_rate(suite="throughput", strategy=s, mode="batch128") or 0)]
    if slower:
        paras.append(
            "**Why target 6 misses.** The cluster's 3 masters, their 3 replicas and the client share this "
            "machine's {} cores, where the one server has a core nearly to itself (\"Redis Cluster (3 "
            "masters) vs one server\", below). docs/cluster.md (\"Throughput\") measures apart what a "
            "master spends beyond one server per decision, and what 3 masters on cores of their own would "
            "decide: a machine with a core for every node and one for the client would show it; this one "
            "cannot.".format(os.cpu_count()))
    return "\n\n".join(paras)
