#!/usr/bin/env python3
"""Where a decision's instructions in FCALL go: scripts/instructions.sh's breakdown (INSTR_ANATOMY=1).

    anatomy.py RUN_DUMP SETUP_DUMP DECISIONS

Reads two callgrind dumps of redis-server (the measured run and the bench's set-up alone, which is
taken off, as instructions.sh does for the total) and prints, per decision, what Redis spent inside
FCALL on: the KEYS and ARGV tables it builds for the call, the script (its redis.call()s, split into
the command itself, its reply turned into Lua values and the rest of the call; the C library calls,
struct and string; the Lua VM itself), the script's reply, and Lua's garbage collector.

Debian's redis-server names its exported functions only; Lua's own (luaD_precall, luaC_step) and
Redis's static ones (luaCreateArray, luaReplyToRedisReply, luaRedisCallCommand) show as addresses.
Those are found by what they call, so that another build of Redis 7 reads the same:
- the argument tables: what luaCallFunction calls that calls lua_createtable;
- the reply: what luaCallFunction calls that calls an addReply* function;
- redis.call and redis.pcall: the callers of scriptCall; the C library calls: whatever else their
  caller (Lua's dispatcher of C functions) calls;
- the collector: lua_gc under luaCallFunction (Redis's step every 50 calls), and the rest of the
  step function lua_gc calls (steps that allocations trigger, in the tables, the commands' replies
  and the script: counted inside those, and shown apart).
"""
import re
import subprocess
import sys

ROW = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+([*>])\s+\S*?:(\S+)(?: \(([\d,]+)x\))?")


def read(path):
    """Inclusive cost per function, and (cost, calls) per caller -> callee edge."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=calling", "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    incl, edges, caller = {}, {}, None
    for line in text.split("\n"):
        m = ROW.match(line)
        if not m:
            caller = None if not line.strip() else caller
            continue
        cost = int(m.group(1).replace(",", ""))
        if m.group(2) == "*":
            caller = m.group(3)
            incl[caller] = cost
        elif caller:
            edges[(caller, m.group(3))] = (cost, int((m.group(4) or "0").replace(",", "")))
    return incl, edges


def figures(incl, edges):
    callees = {}
    for (a, b), v in edges.items():
        callees.setdefault(a, {})[b] = v

    def edge(a, b, i=0):
        return edges.get((a, b), (0, 0))[i]

    def calling(f, pred):
        return [c for c in callees.get(f, {}) if any(pred(x) for x in callees.get(c, {}))]

    main = "luaCallFunction"
    args = sum(edge(main, c) for c in calling(main, lambda x: x == "lua_createtable"))
    reply = sum(edge(main, c) for c in calling(main, lambda x: x.startswith("addReply")))
    handlers = sorted({a for (a, b) in edges if b == "scriptCall"})
    dispatch = {a for (a, b) in edges if b in handlers}
    commands = sum(edge(d, h) for d in dispatch for h in handlers)
    count = sum(edge(d, h, 1) for d in dispatch for h in handlers)
    itself = sum(edge(h, "scriptCall") for h in handlers)
    into_lua = sum(edge(h, "parseReply") for h in handlers)
    library = sum(v[0] for d in dispatch for c, v in callees.get(d, {}).items() if c not in handlers)
    step = max(callees.get("lua_gc", {"": (0, 0)}).items(), key=lambda kv: kv[1][0])[0]
    gc = edge(main, "lua_gc")
    return {
        "total": incl.get("fcallCommand", 0), "args": args, "script": edge(main, "lua_pcall"),
        "commands": commands, "count": count, "itself": itself, "into_lua": into_lua,
        "library": library, "reply": reply, "gc": gc, "gc_alloc": incl.get(step, 0) - edge("lua_gc", step),
    }


def main():
    run, setup, decisions = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
    a, b = figures(*run), figures(*setup)
    f = {k: (a[k] - b[k]) / decisions for k in a}
    vm = f["script"] - f["commands"] - f["library"]
    rows = [
        ("the KEYS and ARGV tables", f["args"]),
        ("the script", f["script"]),
        (f"  redis.call: {f['count']:.2f} commands, the command itself", f["itself"]),
        ("  redis.call: its reply turned into Lua", f["into_lua"]),
        ("  redis.call: the rest of the call", f["commands"] - f["itself"] - f["into_lua"]),
        ("  C library calls (struct, string, ...)", f["library"]),
        ("  the Lua VM", vm),
        ("the reply", f["reply"]),
        ("the collector, Redis's step every 50 calls", f["gc"]),
        ("the rest of FCALL", f["total"] - f["args"] - f["script"] - f["reply"] - f["gc"]),
        ("(within the above: collector steps that allocations trigger)", f["gc_alloc"]),
    ]
    for name, v in rows:
        print(f"    {name:62} {v:9,.0f}")


if __name__ == "__main__":
    main()
