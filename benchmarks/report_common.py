"""What every part of the report (benchmarks/report.py) shares: the strategies and modes measured,
the number formats, the Results class over a run's rows, and the figures taken as the best of the
repetitions with their spreads (the lowest–highest over the repetitions)."""
import json
from types import SimpleNamespace

STRATEGIES = [
    ("fixed_window", "fixed window"),
    ("sliding_log", "sliding log"),
    ("sliding_log_compact", "sliding log, compact entries (Options::sliding_log_members)"),
    ("sliding_window", "sliding window (precision = window)"),
    ("sliding_window_p10", "sliding window (precision = window/10)"),
    ("token_bucket", "token bucket"),
    ("leaky_bucket", "leaky bucket (meter)"),
    ("policy3", "policy of 3 limits"),
]
SHORT = {
    "fixed_window": "fixed window",
    "sliding_log": "sliding log",
    "sliding_log_compact": "sliding log (compact)",
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
RLF = "rate-limiter-flexible"


def fmt_rate(x):
    if x is None:
        return "-"
    if x >= 100000:
        return "{:,.0f}".format(round(x, -3))
    return "{:,.0f}".format(round(x, -1) if x >= 1000 else x)


def fmt_us(x):
    return "-" if x is None else "{:.2f}".format(x)


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


def inner_commands(row):
    """The commands a row's script runs per decision (e.g. "get=0.00 mget=1.00 set=0.79"),
    the CONFIG RESETSTAT before the run left out."""
    return " ".join(x for x in (row or {}).get("inner", "").split() if not x.startswith("config"))


def reference_figures(res):
    """The figures of the references (redis-benchmark's ceiling, the same script through redlimit's
    connection, rate-limiter-flexible) that the targets and their reasons compare against."""
    return SimpleNamespace(
        rb_c1=res.best_rate(suite="redis-benchmark", mode="c1"),
        rb_p32=res.best_rate(suite="redis-benchmark", mode="P32"),
        rb_usec=res.min_usec(suite="redis-benchmark", mode="c1"),
        raw_seq=res.best_rate(suite="raw", mode="seq"),
        empty_usec=res.min_usec(suite="raw", mode="empty_decision_script"),
        rlf_seq=res.best_rate(suite="peer", who=RLF, mode="seq"),
        rlf_64=res.best_rate(suite="peer", who=RLF, mode="inflight64"),
        rlf_usec=res.min_usec(suite="peer", who=RLF),
        rlf_inner=(res.first(suite="peer", who=RLF, mode="seq") or {}).get("inner", ""),
    )
