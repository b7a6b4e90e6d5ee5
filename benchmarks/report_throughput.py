"""The tables of docs/performance.md on decisions per second and Redis's CPU (report.py imports it):
decisions per second by strategy and mode, the ceiling and the peers, Redis CPU per decision, Redis
Functions against EVALSHA, capacity planning and the sizing of the connection pool."""
from report_common import (MODES, RLF, SHORT, STRATEGIES, best_mode, fmt_k, fmt_rate, fmt_us, inner_commands,
                           rate_of, script_usec, server_cpu, single_usec, with_spread)


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
              ("threads8_flights2", "pool of 4, shared, 2 calls out"), ("threads8_flights1", "pool of 4, shared, 1 call out"),
              ("threads8_linger", "pool of 4, shared, 1 call out, 200 us linger"),
              ("threads8_linger4", "pool of 4, shared, 200 us linger"), ("threads8_unshared", "pool of 4, unshared"))


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



def throughput_table(res):
    """The table "Decisions per second": a row per mode, and the best concurrent mode of each strategy."""
    th = ["| mode | " + " | ".join(SHORT[s] for s, _ in STRATEGIES) + " |", "|---|" + "---:|" * len(STRATEGIES)]
    for mode, label in MODES:
        cells = [with_spread(res, lambda rr: rate_of(rr, s, mode), short=fmt_k) for s, _ in STRATEGIES]
        th.append("| {} | {} |".format(label, " | ".join(cells)))
    cells = []
    for s, _ in STRATEGIES:
        b, m = best_mode(res, s)
        # Each repetition's own best mode: the range is of the row's figure, whichever mode won.
        cells.append("{}: {}".format(m, with_spread(res, lambda rr: best_mode(rr, s)[0], short=fmt_k)) if b else "-")
    th.append("| **best concurrent** | {} |".format(" | ".join(cells)))
    return "\n".join(th)


def async_note(res):
    """The line that says why the asynchronous rows are missing, if they are."""
    missing_async = [r for r in res.select(suite="throughput") if r.get("missing")]
    if not missing_async:
        return ""
    return "\nThe asynchronous rows are **missing**: {}.\n".format(missing_async[0]["missing"])


def _us(res, figure):
    """A Redis CPU figure (us per decision) with its spread over the repetitions."""
    return with_spread(res, figure, fmt_us, none="-")


def ceiling_table(res):
    """The table "The ceiling and the peers": redis-benchmark's one-line script, the same through
    redlimit's connection, the floor of a decision script, and the peers."""
    def ceiling_row(label, kw, has_rate=True, usec_kw=None):
        rate_cell = with_spread(res, lambda rr: rr.best_rate(**kw), short=fmt_k, none="-") if has_rate else "-"
        return "| {} | {} | {} |".format(label, rate_cell, _us(res, lambda rr: rr.min_usec(**(usec_kw or kw))))

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
        ceiling_row("floor of a decision script: `return {1, 999, 0, 60000000, 0}` with a fixed-window decision's "
                    "key and 2 arguments", dict(suite="raw", mode="empty_decision_script"), has_rate=False),
        ceiling_row("rate-limiter-flexible 11 (RateLimiterRedis, ioredis), sequential", dict(rlf, mode="seq"),
                    usec_kw=rlf),
        ceiling_row("rate-limiter-flexible, 64 in flight", dict(rlf, mode="inflight64")),
        ceiling_row("Python limits, FixedWindowRateLimiter `hit`, sequential", dict(suite="peer", who="limits fixed_window")),
        ceiling_row("Python limits, MovingWindowRateLimiter `hit`, sequential",
                    dict(suite="peer", who="limits moving_window")),
    ]
    return "\n".join(ceiling)


def cpu_table(res, f):
    """The table "Redis CPU per decision": each strategy's, the peers', the bare one-line script's and
    the floor's. `f`: the reference figures (report_common.reference_figures)."""
    def us(figure):
        return _us(res, figure)

    cpu = ["| strategy | script time per decision, `usec` of commandstats (us) | vs rate-limiter-flexible | "
           "the same, one script call per decision (us) | "
           "Redis main-thread CPU per decision, sequential / pipelined (us) | commands the script runs per "
           "decision (one call per decision) |", "|---|---:|---:|---:|---:|---|"]

    def vs_rlf(u):  # best against best, as the targets compare them
        return "{:.2f}x".format(u / f.rlf_usec) if u and f.rlf_usec else "-"

    for s, label in STRATEGIES:
        cpu.append("| {} | {} | {} | {} | {} / {} | {} |".format(
            label, us(lambda rr: script_usec(rr, s)), vs_rlf(script_usec(res, s)), us(lambda rr: single_usec(rr, s)),
            us(lambda rr: server_cpu(rr, "seq", suite="throughput", strategy=s)),
            us(lambda rr: server_cpu(rr, "batch128", suite="throughput", strategy=s)),
            inner_commands(res.first(suite="throughput", strategy=s, mode="seq")) or "-"))
    for who, label, piped in (
            ("rate-limiter-flexible", "rate-limiter-flexible (its `rlflxIncr` script)", "inflight64"),
            ("limits fixed_window", "Python limits fixed window (`incr_expire.lua`)", None),
            ("limits moving_window", "Python limits moving window (`acquire_moving_window.lua`)", None)):
        script = us(lambda rr: rr.min_usec(suite="peer", who=who))
        inn = inner_commands(res.first(suite="peer", who=who))
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
               "| - |".format(floor, vs_rlf(f.empty_usec), floor,
                               us(lambda rr: server_cpu(rr, "empty_decision_script", suite="raw"))))
    return "\n".join(cpu)
