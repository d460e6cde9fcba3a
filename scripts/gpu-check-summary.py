#!/usr/bin/env python3
"""Writes summary.json for scripts/gpu-check.sh run, and prints the figures.

usage: gpu-check-summary.py RESULTS_DIR STATUS ALLOW_SKIP STARTED

RESULTS_DIR holds parts.tsv (one line per part: name, result, reason,
seconds, limit, exit status), figures.jsonl (what the GPU tests measured,
one JSON object per line) and logs/ (one log per part; the cli and launcher
logs hold commsim bench's JSON Lines). Only the standard library is used:
the GPU machine has python3 and nothing else to rely on.
"""

import json
import os
import platform
import sys


def read_parts(res):
    parts = []
    with open(os.path.join(res, "parts.tsv")) as f:
        for line in f:
            name, result, reason, secs, limit, rc = line.rstrip("\n").split("\t")
            parts.append({"name": name, "result": result, "reason": reason,
                          "seconds": int(secs), "limit_s": int(limit), "exit": int(rc)})
    return parts


def read_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a log line that happens to start with a brace
    return out


def bench_rows(path):
    """The per-size records of a commsim bench --format json log."""
    keep = ("bytes", "ranks", "algo", "time_us", "busbw_gbps", "inplace_time_us", "inplace_busbw_gbps",
            "wrong", "inplace_wrong", "sim_time_us", "sim_busbw_gbps", "sim_topology", "iters")
    return [{k: r[k] for k in keep if k in r} for r in read_jsonl(path) if "bytes" in r]


def figures(res):
    figs = read_jsonl(os.path.join(res, "figures.jsonl"))
    by_kind = {}
    for f in figs:
        by_kind.setdefault(f.get("kind", "?"), []).append(f)
    out = {
        "copy": by_kind.get("copy", []),
        "kernels": by_kind.get("kernel", []),
        "reduce_vs_copy": by_kind.get("reduce_vs_copy", []),
        "ring_busbw": by_kind.get("busbw", []),
        "equivalence": by_kind.get("equivalence", []),
        "latency": by_kind.get("latency", []),
        "cli": bench_rows(os.path.join(res, "logs", "cli.log")),
        "launcher": bench_rows(os.path.join(res, "logs", "launcher.log")),
        "backtoback": bench_rows(os.path.join(res, "logs", "backtoback.log")),
    }
    known = {"copy", "kernel", "reduce_vs_copy", "busbw", "equivalence", "latency"}
    other = [f for f in figs if f.get("kind") not in known]
    if other:
        out["other"] = other
    return out


def tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError as e:
        return ["(no log: %s)" % e]


def main():
    res, status, allow_skip, started = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
    parts = read_parts(res)
    logs = os.path.join(res, "logs")
    summary = {
        "status": status,
        "allow_skip": allow_skip,
        "started": started,
        "host": platform.node(),
        "devices": tail(os.path.join(logs, "devices.log"), 20),
        "parts": parts,
        "seconds": sum(p["seconds"] for p in parts),
        "figures": figures(res),
        "logs_of_parts_not_passed": {p["name"]: tail(os.path.join(logs, p["name"] + ".log"))
                                     for p in parts if p["result"] != "PASS"},
    }
    with open(os.path.join(res, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")

    figs = summary["figures"]
    print("== figures (GB/s = 1e9 bytes/s, bytes read + written)")
    for r in figs["reduce_vs_copy"]:
        print("reduce f32 sum %.1f GB/s = %.1f%% of the d2d copy's %.1f GB/s (target %.0f%%)"
              % (r["reduce_gbps"], 100 * r["ratio"], r["copy_gbps"], 100 * r["target"]))
    for e in figs["equivalence"]:
        print("equivalence %s: %d cases, %d failed" % (e["test"], e["cases"], e["failed"]))
    for r in figs["latency"]:
        print("latency, %s of %d bytes: %.2f us" % (r["what"], r["bytes"], r["us"]))
    for r in figs["cli"]:
        sim = ""
        if "sim_time_us" in r:
            sim = ", sim %.1f us (measured/sim %.2f)" % (r["sim_time_us"], r["time_us"] / r["sim_time_us"] if r["sim_time_us"] else 0)
        print("cli %d bytes: %.1f us, busbw %.2f GB/s%s" % (r["bytes"], r["time_us"], r["busbw_gbps"], sim))
    runs = {}
    for r in figs["backtoback"]:
        runs.setdefault(r["bytes"], {})[r.get("iters", 1)] = r
    for size, by in sorted(runs.items()):
        if 1 in by and 20 in by:
            one, twenty = by[1], by[20]
            print("backtoback broadcast %d bytes: one run %.1f us (sim %.1f), twenty %.1f us a run (sim %.1f)"
                  % (size, one["time_us"], one.get("sim_time_us", 0), twenty["time_us"], twenty.get("sim_time_us", 0)))
    print("summary.json: %d parts, status %s" % (len(parts), status))


if __name__ == "__main__":
    main()
