"""Issue 4's targets in docs/performance.md (report.py imports it): the table of its targets with the
text "Why the misses" that explains each target missed. Issue 13's: report_issue13.py."""
import os
from collections import defaultdict

from report_common import (RLF, SHORT, STRATEGIES, best_mode, fmt_rate, fmt_us, inner_commands, rate_of, script_usec,
                           single_usec)

CPU_TARGET = ("fixed_window", "token_bucket", "leaky_bucket")
MEMORY_TARGET = ("token_bucket", "leaky_bucket")
ALL = tuple(s for s, _ in STRATEGIES)


def ratio(x, y):
    return x / y if x is not None and y else None


def meets(value, goal, at_most=False):
    return value is not None and (value <= goal if at_most else value >= goal)


def verdict(ratio, goal, at_most=False):
    if ratio is None:
        return "not measured"
    return "{:.2f}x **{}**".format(ratio, "PASS" if meets(ratio, goal, at_most) else "MISS")


# ---- Issue 4 -------------------------------------------------------------------------------------
def _verdict_row(misses, key, name, ratio_of, goal, at_most=False, only=ALL):
    """A row of the issue-4 table: the verdict on ratio_of(strategy) for each strategy of `only`
    ("n/a" for the others); each miss goes to misses[key] as (strategy, ratio)."""
    cells = []
    for s, _ in STRATEGIES:
        if s not in only:
            cells.append("n/a")
            continue
        r = ratio_of(s)
        cells.append(verdict(r, goal, at_most))
        if r is not None and (r > goal if at_most else r < goal):
            misses[key].append((s, r))
    return "| {} | {} |".format(name, " | ".join(cells))


def _memory_row(res, misses):
    """The issue-4 row of memory per subject, in bytes against 100; each miss goes to misses["memory"]."""
    cells = []
    for s, _ in STRATEGIES:
        if s not in MEMORY_TARGET:
            cells.append("n/a")
            continue
        # The mean over the subjects when measured, else the one subject's.
        r = res.first(suite="memory", strategy=s, state="one decision") or {}
        b = r.get("bytes_mean", r.get("bytes"))
        ok = b is not None and b <= 100
        cells.append("-" if b is None else "{:.1f} B **{}**".format(b, "PASS" if ok else "MISS"))
        if b is not None and b > 100:
            misses["memory"].append((s, b))
    return "| {} | {} |".format("memory per subject <= 100 bytes", " | ".join(cells))


def _last_flood(res, who):
    """Redis CPU per request in the last (largest) stage of a flood, or None."""
    rows = res.select(suite="flood", who=who)
    return rows[-1]["usec_per_call"] if rows else None


def targets_table(res, f):
    """The table of issue 4's targets, and its misses: what failed which target (target -> [(strategy,
    ratio or bytes)]). `f`: the reference figures (report_common.reference_figures)."""
    misses = defaultdict(list)

    def best(s):
        return best_mode(res, s)[0]

    flood = ratio(_last_flood(res, "redlimit sliding log"), _last_flood(res, "limits moving window"))
    t = ["| target (issue 4) | " + " | ".join(SHORT[s] for s, _ in STRATEGIES) + " |",
         "|---|" + "---|" * len(STRATEGIES),
         _verdict_row(misses, "seq_rb", "sequential, 1 connection >= 0.9x `redis-benchmark -c 1` EVALSHA",
                      lambda s: ratio(rate_of(res, s, "seq"), f.rb_c1), 0.9),
         _verdict_row(misses, "seq_rlf", "sequential, 1 connection >= 1.3x rate-limiter-flexible sequential",
                      lambda s: ratio(rate_of(res, s, "seq"), f.rlf_seq), 1.3),
         _verdict_row(misses, "conc_rlf", "best concurrent mode >= 5x rate-limiter-flexible, 64 in flight",
                      lambda s: ratio(best(s), f.rlf_64), 5),
         _verdict_row(misses, "conc_p32", "best concurrent mode >= 0.5x `redis-benchmark -P 32` EVALSHA",
                      lambda s: ratio(best(s), f.rb_p32), 0.5),
         _verdict_row(misses, "cpu", "Redis CPU per decision <= 0.6x rate-limiter-flexible's script",
                      lambda s: ratio(script_usec(res, s), f.rlf_usec), 0.6, at_most=True, only=CPU_TARGET),
         _verdict_row(misses, "flood", "flooded at 100x its limit: Redis CPU per request <= limits' moving window",
                      lambda s: flood, 1.0, at_most=True, only=("sliding_log",)),
         _memory_row(res, misses)]
    return "\n".join(t), misses


def _ratios(pairs):
    return ", ".join("{} {:.2f}x".format(SHORT[s], r) for s, r in pairs)


def _why_seq_rb(res, f, missed, fw_client_ns):
    rtt = 1e6 / f.rb_c1 if f.rb_c1 else None
    raw_seq = f.raw_seq
    seq = [(s, rate_of(res, s, "seq")) for s, _ in missed]
    return (
        "**Sequential vs `redis-benchmark -c 1` ({}).** One connection waits for each reply, so a "
        "decision costs one loopback round trip plus the script's time in Redis plus redlimit's own "
        "time in the client. `redis-benchmark -c 1` takes {} us a call, {} us of it in its one-line "
        "script. The same one-line script through redlimit's own connection (plain blocking hiredis) "
        "runs at {} calls/s, {:.2f}x redis-benchmark in this run, and a redlimit decision at {} of "
        "that rate: {}. So most of what is missing is the round trip itself, whose measure against "
        "redis-benchmark's moves from run to run on this machine (1.41x in an earlier run); the rest "
        "is the scripts' time ({}; table below), every microsecond of which is added to the round "
        "trip, and about {} us of client CPU per decision (last table).".format(
            _ratios(missed), fmt_us(rtt), fmt_us(f.rb_usec), fmt_rate(raw_seq),
            raw_seq / f.rb_c1 if raw_seq and f.rb_c1 else 0,
            "between {:.2f}x and {:.2f}x".format(
                min(r / raw_seq for s, r in seq if r), max(r / raw_seq for s, r in seq if r))
            if raw_seq else "?",
            ", ".join("{} {:.2f}x".format(SHORT[s], r / raw_seq) for s, r in seq if r and raw_seq),
            ", ".join("{} {} us".format(SHORT[s], fmt_us(single_usec(res, s))) for s, _ in missed),
            "{:.1f}".format(fw_client_ns / 1000) if fw_client_ns else "?"))


def _why_seq_rlf(f, missed):
    return (
        "**Sequential vs rate-limiter-flexible ({}).** Same round trip on both sides; the difference "
        "is the script's Redis CPU (rate-limiter-flexible's is {} us) against the client-side cost "
        "of Node and ioredis.".format(_ratios(missed), fmt_us(f.rlf_usec)))


def _piped_cpu(res, s):
    """The least main-thread CPU per decision of any mode that pipelines."""
    vals = [r["server_cpu_us_per_decision"] for r in res.select(suite="throughput", strategy=s)
            if r.get("mode") not in ("seq", "pool2", "pool4", "pool8") and r.get("server_cpu_us_per_decision")]
    return min(vals) if vals else None


def _why_concurrent(res, f, misses):
    parts = []
    if misses["conc_p32"]:
        parts.append("vs the pipelined ceiling: " + _ratios(misses["conc_p32"]))
    if misses["conc_rlf"]:
        parts.append("vs rate-limiter-flexible with 64 in flight: " + _ratios(misses["conc_rlf"]))
    piped = {s: _piped_cpu(res, s) for s, _ in STRATEGIES}
    bounds = []
    for s, _ in STRATEGIES:
        c = piped[s]
        b, _m = best_mode(res, s)
        if c and b:
            bounds.append("{} {} (best mode: {:.0f}% of it)".format(SHORT[s], fmt_rate(1e6 / c), 100.0 * b * c / 1e6))
    rb_piped = res.min_usec(key="server_cpu_us_per_decision", suite="redis-benchmark", mode="P32")
    rlf_piped = res.min_usec(key="server_cpu_us_per_decision", suite="peer", who=RLF, mode="inflight64")
    rlf_64 = f.rlf_64
    return (
        "**Best concurrent mode ({}).** Once requests are pipelined, Redis's one thread is the "
        "bottleneck: it can decide at most 1,000,000 / (its CPU time per decision, socket work "
        "included) a second. With the least main-thread CPU per decision measured in any pipelined "
        "mode, that bound is: {}. The "
        "pipelined ceiling runs a one-line INCR script at {} us of main-thread CPU per call; a "
        "`consume_many` batch shares one script call's fixed cost over up to 256 decisions, but "
        "each decision still reads its state, writes it back with a TTL and returns its integers "
        "(one for an admission that waits for nothing, five otherwise). "
        "rate-limiter-flexible with 64 in flight reaches {} decisions/s at {} us a decision; 5x "
        "that is {} decisions/s ({:.1f}x the bound of our cheapest). On this {}-core machine the "
        "client (building and decoding the batches) also shares the cores with Redis.".format(
            "; ".join(parts), "; ".join(bounds) or "-", fmt_us(rb_piped), fmt_rate(rlf_64),
            fmt_us(rlf_piped), fmt_rate(5 * rlf_64) if rlf_64 else "-",
            (5 * rlf_64) / max(1e6 / c for c in piped.values() if c)
            if rlf_64 and any(piped.values()) else 0,
            os.cpu_count()))


def _why_cpu(res, f, missed):
    def inner(sid):
        return inner_commands(res.first(suite="throughput", strategy=sid, mode="seq"))

    floor_ratio = "{:.2f}x".format(f.empty_usec / f.rlf_usec) if f.empty_usec and f.rlf_usec else "?"
    return (
        "**Redis CPU per decision vs rate-limiter-flexible ({}).** rate-limiter-flexible's script "
        "runs `{}` per decision and returns two numbers. Ours, a call per decision: fixed window `{}`; "
        "token bucket `{}`; leaky bucket `{}`. The fixed window's `HINCRBY` answers the count (a "
        "window's first request adds `PEXPIRE`); the buckets, in a `consume_many` batch, make one "
        "`MGET` for the whole batch and one write per admitted request (`SETRANGE`, in place, within "
        "a bucket's lease: the state's first 20 bytes when the key holds it alone; `PSETEX` otherwise: "
        "a new lease, a new subject). What is left per decision is that write, the state's packing, "
        "the script's Lua arithmetic and the "
        "integers of its decision (one for an admission that waits for nothing, five otherwise); a script that "
        "touches nothing and returns a decision costs {} us a call ({} of rate-limiter-flexible's "
        "whole script).".format(
            _ratios(missed), f.rlf_inner.replace("config|resetstat=0.00", "").strip(), inner("fixed_window"),
            inner("token_bucket"), inner("leaky_bucket"), fmt_us(f.empty_usec), floor_ratio))


def _why_flood(missed):
    return (
        "**Flooded sliding log ({:.2f}x limits' moving window).** Both stay flat as the flood grows "
        "(the table shows it): rejected requests record nothing. A rejected request costs limits one "
        "`LINDEX`; ours, when it is a call of its own, the newest and the oldest live entry, "
        "`ZCARD`, `ZCOUNT` and a rank read for the exact retry_after. Inside a batch, "
        "repeated rejections of one subject are answered from the script's own table. The opt-in "
        "local reject cache (`Options::local_reject_cache`) takes such a flood off Redis "
        "altogether.".format(missed[0][1]))


def _why_memory(res, missed):
    rlf_mem = (res.first(suite="peer_memory", who=RLF) or {}).get("bytes")
    return (
        "**Memory per subject ({}).** The state carries the configuration it was written under "
        "(28 bytes for a bucket with its lease; see the memory section below), which puts "
        "its value in a 48-byte block: 104 B a subject, where 0.2's untagged 12-byte state took 88 B. "
        "A fixed window's hash of one field takes 120 B. "
        "rate-limiter-flexible stores a small integer under a short key: {} B.".format(
            ", ".join("{} {:.1f} B".format(SHORT[s], b) for s, b in missed), rlf_mem or "?"))


def why_the_misses(res, f, misses, fw_client_ns):
    """The text "Why the misses": a paragraph for each issue-4 target missed (`misses` from
    targets_table). `fw_client_ns`: the client's CPU per fixed-window decision, from the micro
    benchmarks, or None."""
    why = []
    if misses["seq_rb"]:
        why.append(_why_seq_rb(res, f, misses["seq_rb"], fw_client_ns))
    if misses["seq_rlf"]:
        why.append(_why_seq_rlf(f, misses["seq_rlf"]))
    if misses["conc_rlf"] or misses["conc_p32"]:
        why.append(_why_concurrent(res, f, misses))
    if misses["cpu"]:
        why.append(_why_cpu(res, f, misses["cpu"]))
    if misses["flood"]:
        why.append(_why_flood(misses["flood"]))
    if misses["memory"]:
        why.append(_why_memory(res, misses["memory"]))
    return "\n\n".join(why) if why else "Every target was met in this run."
