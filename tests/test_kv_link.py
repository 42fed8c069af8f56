#!/usr/bin/python3
"""The measured migration rate fed back into the stage-06 simulator (mpi label).

    tests/test_kv_link.py MPIRUN KV_MIGRATE LADDER CONFIG

1. mpirun -np 3 ladder-kv-migrate --write-link link.json writes a link model fitted to the migrations
   it measured (link_GBps > 0, latency_ms >= 0) and the migration stays bit-identical;
2. a simulator config with "kv_transfer": {"measured": "link.json"} gives the same results as the same
   config with those two numbers typed in, and other results than a free link (the rate is used);
3. a measured file without link_GBps, or "measured" beside a typed-in link_GBps, is one line and exit 2.
"""
import json
import os
import subprocess
import sys
import tempfile

mpirun, migrate, ladder, base_config = sys.argv[1:5]
failures = 0


def check(ok, what, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        print(detail)
        failures += 1


def simulate(cfg_path):
    p = subprocess.run([ladder, "simulate", "--config", cfg_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    # The first line names the config file; everything after it is the simulation's.
    body = "\n".join(l for l in p.stdout.splitlines() if not l.startswith("config "))
    return p.returncode, body, p.stderr


with tempfile.TemporaryDirectory() as tmp:
    link = os.path.join(tmp, "link.json")
    p = subprocess.run([mpirun, "--oversubscribe", "-np", "3", migrate, "--write-link", link], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    check(p.returncode == 0 and "BIT-IDENTICAL" in p.stdout and os.path.exists(link),
          "ladder-kv-migrate --write-link: migration bit-identical, link model written", p.stdout)
    m = json.load(open(link)) if os.path.exists(link) else {}
    check(m.get("link_GBps", 0) > 0 and m.get("latency_ms", -1) >= 0,
          f"link model: {m.get('link_GBps', 0):.3f} GB/s, latency {m.get('latency_ms', -1):.4f} ms", m)

    cfg = json.load(open(base_config))
    cfg["workload"]["requests"] = 300
    paths = {}
    for name, kv in {"measured": {"measured": "link.json"},
                     "typed": {"link_GBps": m.get("link_GBps", 1), "latency_ms": m.get("latency_ms", 0)},
                     "free": {"link_GBps": 0, "latency_ms": 0},
                     "both": {"measured": "link.json", "link_GBps": 1},
                     "broken": {"measured": "bad-link.json"}}.items():
        c = dict(cfg, kv_transfer=kv)
        paths[name] = os.path.join(tmp, name + ".json")
        json.dump(c, open(paths[name], "w"))
    json.dump({"latency_ms": 0.1}, open(os.path.join(tmp, "bad-link.json"), "w"))

    rm, bm, em = simulate(paths["measured"])
    rt, bt, _ = simulate(paths["typed"])
    rf, bf, _ = simulate(paths["free"])
    check(rm == 0 and rt == 0 and bm == bt, "kv_transfer.measured = the same numbers typed in (identical results)",
          em)
    check(rf == 0 and bm != bf, "the measured link changes the results against a free link (the rate is used)")
    for name, want in (("both", "kv_transfer.measured excludes link_GBps"), ("broken", "link_GBps violates")):
        r, _, err = simulate(paths[name])
        lines = [l for l in err.strip().splitlines() if l]
        check(r == 2 and len(lines) == 1 and want in err, f"bad kv_transfer ({name}): exit {r}, one line", err)

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
