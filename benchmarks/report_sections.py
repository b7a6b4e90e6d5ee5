"""The other tables of docs/performance.md (report.py imports them): the machine and versions of the
run, memory per subject, how cost grows with the subjects, the flooded sliding log, the largest
quotas, quota leases and the client-side CPU from the micro benchmarks (Google Benchmark's JSON)."""
import datetime
import json
import os
import platform
import re
import subprocess

from report_common import SHORT, STRATEGIES, fmt_rate, fmt_us


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def dpkg_version(pkg):
    return run(["dpkg-query", "-W", "-f=${Version}", pkg]) or "not installed"


def _cpu_and_memory():
    """The CPU's model name and the memory of this machine, from /proc."""
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
    return cpu, mem


def _redis_version(port):
    """The version of the redis-server the run used (asked on its port), else of the one installed."""
    redis_version = ""
    if port:
        info = run(["redis-cli", "-p", str(port), "INFO", "server"])
        m = re.search(r"redis_version:(\S+)", info)
        redis_version = m.group(1) if m else ""
    if not redis_version:
        m = re.search(r"v=(\S+)", run(["redis-server", "--version"]))
        redis_version = m.group(1) if m else "unknown"
    return redis_version


def machine_section(a, res):
    """The table of the machine, the versions and the run's settings."""
    cpu, mem = _cpu_and_memory()
    redis_version = _redis_version(a.port)
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



def memory_table(res):
    """The table "Memory per subject": each strategy's key after one decision, the sliding log's at its
    full limit, and the peers'."""
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
    return "\n".join(mem)


def growth_section(res):
    """The table "How cost grows with the number of subjects", and the note before it: the sizes left
    out and the largest measured."""
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
    note = ""
    if skipped:
        note = "\nSizes left out to keep the run within its time budget: " + "; ".join(
            "{} at {:,} subjects ({})".format(lbl, n, why_) for lbl, n, why_ in skipped) + ". "
    if largest:
        note += "Largest size measured: " + ", ".join(
            "{} {:,}".format(SHORT[s], n) for s, n in largest.items()) + ".\n"
    if note and not note.startswith("\n"):
        note = "\n" + note
    return "\n".join(gr), note


def flood_table(res):
    """The table "A sliding log flooded at 100x its limit": redlimit's stages, then Python limits'."""
    fl = ["| who | requests (x limit) | admitted | Redis CPU per request (us) | decisions/s | key size (B) |",
          "|---|---|---:|---:|---:|---:|"]
    ours = res.select(suite="flood", who="redlimit sliding log")
    for r in ours + res.select(suite="flood", who="limits moving window"):
        L = r["limit"]
        fl.append("| {} | {}..{} ({:g}x..{:g}x) | {} | {} | {} | {} |".format(
            r["who"], r["from"], r["to"], r["from"] / L, r["to"] / L, r["allowed"], fmt_us(r["usec_per_call"]),
            fmt_rate(r["rate"]), r.get("bytes", "-")))
    return "\n".join(fl)


def largest_table(res):
    """The table "The largest quotas"."""
    lg = ["| strategy and quota | stage | calls | Redis CPU per call (us) | key size (B) |",
          "|---|---|---:|---:|---:|"]
    for r in res.select(suite="largest"):
        lg.append("| {} | {} | {} | {} | {} |".format(r["who"], r["stage"], r["calls"], fmt_us(r["usec_per_call"]),
                                                      r.get("bytes", "-")))
    return "\n".join(lg) if len(lg) > 2 else "(not measured in this run)"


def buckets_table(res):
    """The table "Buckets": a sliding window's Redis CPU per decision by its number of buckets."""
    bk = ["| buckets (window / precision) | Redis CPU per decision (us) | per bucket (us) | key size (B) "
          "| per rejection (us) | consume_many of 64: script calls, the longest (us) |",
          "|---:|---:|---:|---:|---:|---:|"]
    for r in res.select(suite="buckets"):
        per = r["usec_per_call"] / r["buckets"]
        rejection = fmt_us(r["usec_per_rejection"]) if "usec_per_rejection" in r else "-"
        batch = "{}, {:,}".format(r["batch_script_calls"], r["batch_slowest_usec"]) if "batch_script_calls" in r else "-"
        bk.append("| {:,} | {} | {} | {} | {} | {} |".format(r["buckets"], fmt_us(r["usec_per_call"]), fmt_us(per),
                                                            r.get("bytes", "-"), rejection, batch))
    return "\n".join(bk) if len(bk) > 2 else "(not measured in this run)"


def heap_table(res):
    """The table "The Lua heap": script time per decision on a fresh library and an aged one."""
    ht = ["| strategy | fresh library (us) | after 16,000 bucket names (us) | ratio | Functions heap, fresh / aged |",
          "|---|---:|---:|---:|---|"]
    for r in res.select(suite="heap"):
        ht.append("| {} | {} | {} | {:.2f}x | {:,} / {:,} B |".format(
            r["strategy"].replace("_", " "), fmt_us(r["usec_fresh"]), fmt_us(r["usec_aged"]),
            r["usec_aged"] / r["usec_fresh"] if r["usec_fresh"] > 0 else 0, r["heap_fresh"], r["heap_aged"]))
    return "\n".join(ht) if len(ht) > 2 else "(not measured in this run)"


def lease_table(res):
    """The table "Quota leases": per request against through redlimit::Leases."""
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
    return "\n".join(ls) if len(ls) > 2 else "(not measured in this run)"


def _micro_rows(res, micro):
    """The micro benchmarks' rows: from the results, else from Google Benchmark's JSON file `micro`."""
    rows = res.select(suite="micro")
    if not rows and micro and os.path.exists(micro) and os.path.getsize(micro) > 0:
        try:
            with open(micro) as f:
                rows = json.load(f).get("benchmarks", [])
        except ValueError:
            rows = []
    return rows


def micro_section(res, micro):
    """The table "Client-side CPU per decision" (no I/O), and the fixed window's CPU per decision in
    ns from it (None if not measured), which "Why the misses" quotes."""
    micro_lines = []
    micro_rows = _micro_rows(res, micro)
    if micro_rows:
        try:
            micro_lines = ["| benchmark | CPU per decision (ns) | decisions/s on one thread | heap allocations per decision |",
                           "|---|---:|---:|---:|"]
            for b in micro_rows:
                per = b["cpu_time"]
                unit = b.get("time_unit", "ns")
                per_ns = per * {"ns": 1, "us": 1e3, "ms": 1e6}.get(unit, 1)
                if "batch128" in b["name"]:
                    per_ns /= 128
                allocs = b.get("allocs")  # already per decision (micro_bench.cpp, AllocationCount)
                micro_lines.append("| {} | {:.0f} | {:,.0f} | {} |".format(
                    b["name"].replace("BM_", ""), per_ns, 1e9 / per_ns if per_ns > 0 else 0,
                    "-" if allocs is None else "{:.1f}".format(allocs)))
        except (ValueError, KeyError):
            micro_lines = []
    fw_client_ns = None
    for line in micro_lines:
        if line.startswith("| fixed_window |"):
            fw_client_ns = float(line.split("|")[2])
    return "\n".join(micro_lines) if micro_lines else "_not measured (Google Benchmark not found)_", fw_client_ns
