#!/usr/bin/env python3
"""Tunes, adds and refreshes the schedules shipped with mlk (schedules/shipped.json).

The runtime compiles a shipped schedule when the cache has no tuned artifact
for a call and an entry matches the call's fn (program hash), precision and
this machine's CPU family and cores (runtime/shipped.h, docs/runtime.md). The
database holds schedules as data, not binaries, each with its provenance.

  scripts/ship_schedules.py tune [--set minilm|examples|all] [--only FN] [--time S] [--again]
      tunes every (program, fn, dims, precision) of the set on this machine
      (`mlk tune --target host`, an empty cache of its own) and adds or
      replaces its entries for this machine's family; one this family
      already has for the fn as it is now is kept unless --again
  scripts/ship_schedules.py check [--drop [--all]]
      lists every entry and says whether its fn still has the program hash it
      was tuned for, and which were tuned under older rules; --drop removes
      this family's entries whose fn changed (tune them again), naming each,
      and with --all those of every family. Exit 1 when an entry is stale
      and not dropped
  scripts/ship_schedules.py verify
      check, then compiles every entry tuned for this machine's family and
      cores and checks its results against the reference interpreter
      (`mlk verify --level envelope`) at the smallest shape shipped for its
      fn, or the shape VERIFY_AT names (a schedule is data: it compiles at
      any shape); entries of other
      families are listed as verified on their own machines. Exit 1 when an
      entry is stale or fails (the test shipped.verify runs this)
  scripts/ship_schedules.py families
      the CPU families the database covers, with their entry counts

A machine of a family not yet covered adds it by running `tune` there.
"""
import argparse
import datetime
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DB = os.path.join(ROOT, "schedules", "shipped.json")
FORMAT = "mlk-shipped-schedules-1"

MINILM = "examples/minilm/minilm.tl"
# (program, fn, dims, time in seconds): MiniLM's step fns at common shapes
# and the examples at the shapes their docs use.
SETS = {
    "minilm": [(MINILM, "layer", "B=%d,S=%d,D=384,H=12,F=1536" % (b, s), 90) for b in (1, 8, 32) for s in (128, 256, 512)]
    + [(MINILM, "embed", "B=%d,S=%d,V=30522,P=512,T=2,D=384" % (b, s), 30) for b in (1, 8, 32) for s in (128, 256, 512)]
    + [(MINILM, "pool", "B=%d,S=%d,D=384" % (b, s), 20) for b in (1, 8, 32) for s in (128, 256, 512)]
    # The packed-token forms (ragged batches): N sentences of up to W = 128
    # tokens, S = N * 64 of them in all (half full on average).
    + [(MINILM, "layer_packed", "B=1,S=%d,N=%d,W=128,D=384,H=12,F=1536" % (n * 64, n), 90) for n in (8, 32)]
    + [(MINILM, "embed_packed", "B=1,S=%d,V=30522,P=512,T=2,D=384" % (n * 64), 30) for n in (8, 32)]
    + [(MINILM, "pool_packed", "B=1,S=%d,D=384,N=%d,W=128" % (n * 64, n), 20) for n in (8, 32)],
    "examples": [
        ("examples/mlp.tl", "mlp", "N=512,D=1024,F=4096", 120),
        ("examples/mlp.tl", "sgemm", "M=1024,K=1024,N=1024", 90),
        ("examples/norms.tl", "rmsnorm", "B=8,S=512,D=4096", 30),
        ("examples/norms.tl", "rmsnorm", "B=8,S=128,D=384", 30),  # the README's Python example
        ("examples/norms.tl", "layernorm", "N=4096,D=1024", 30),
        ("examples/softmax.tl", "softmax_builtin", "N=1024,C=1024", 30),
        ("examples/attention.tl", "attention", "B=4,S=256,D=512,H=8", 90),
    ],
}
SETS["all"] = SETS["minilm"] + SETS["examples"]

# Where `verify` checks a fn's entries when not at the smallest shape shipped
# for it: the examples are tuned at sizes whose F64 reference takes minutes,
# and the policy's calibrated envelope (atol 1e-5 sqrt(K) + rtol 1e-4 |y|,
# docs/numerics.md) assumes terms of unit size. The mlp at D = 1024,
# F = 4096 breaks that: its second product sums 4096 terms near 5 in size
# (the GELU of first-product results of rms 10.7) into results of rms 280,
# so an F32 sum's rounding is near 1e-3 absolute (4e-6 of the results'
# scale), over atol at the results that cancel to near zero: the naive
# schedule fails there as the tuned one does. A schedule is data and
# compiles at any shape, so it is checked where the reference is quick and
# the bound means what it says.
VERIFY_AT = {
    ("examples/mlp.tl", "mlp"): "N=64,D=256,F=1024",
    ("examples/mlp.tl", "sgemm"): "M=128,K=256,N=128",
    ("examples/norms.tl", "rmsnorm"): "B=2,S=64,D=512",
    ("examples/norms.tl", "layernorm"): "N=256,D=512",
    ("examples/softmax.tl", "softmax_builtin"): "N=128,C=256",
    ("examples/attention.tl", "attention"): "B=1,S=64,D=128,H=4",
    (MINILM, "layer_packed"): "B=1,S=128,N=2,W=64,D=384,H=12,F=1536",
    (MINILM, "embed_packed"): "B=1,S=128,V=30522,P=512,T=2,D=384",
    (MINILM, "pool_packed"): "B=1,S=128,D=384,N=2,W=64",
}


def mlk_bin(args):
    return os.path.abspath(args.mlk)


def locked():
    """An exclusive lock on the database for one read-modify-write (two tunes at once lose nothing)."""
    f = open(DB + ".lock", "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def load_db():
    with open(DB) as f:
        db = json.load(f)
    if db.get("format") != FORMAT:
        sys.exit("%s: format is not %s" % (DB, FORMAT))
    return db


def save_db(db):
    db["entries"].sort(key=lambda e: (e["program"], e["fn"], e["precision"], e["machine"]["family_key"],
                                      e["machine"]["cores"], sorted(e["dims"].items())))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(DB), prefix=".shipped-")
    with os.fdopen(fd, "w") as f:
        json.dump(db, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, DB)


def machine(args):
    out = subprocess.run([mlk_bin(args), "targets", "--json"], capture_output=True, text=True, check=True).stdout
    m = json.loads(out)["machine"]
    return {"family_key": m["family_key"], "cores": m["cores"], "cpu_model": m["cpu_model"],
            "cpu_vendor": m["cpu_vendor"], "cpu_family": m["cpu_family"], "cpu_model_number": m["cpu_model_number"]}


def fn_hashes(args, program, precision):
    out = subprocess.run([mlk_bin(args), "check", os.path.join(ROOT, program), "--hash", "--precision", precision],
                         capture_output=True, text=True, check=True).stdout
    hashes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            hashes[parts[1]] = parts[0]
    return hashes


def tune_one(args, program, fn, dims, seconds, precision, mach):
    work = tempfile.mkdtemp(prefix="mlk-ship-")
    try:
        cmd = [mlk_bin(args), "tune", os.path.join(ROOT, program), "--target", "host", "--fn", fn, "--dims", dims,
               "--time", str(seconds), "--cache", os.path.join(work, "cache.db"), "-o", os.path.join(work, "out"),
               "--json"]
        if precision != "f32":
            cmd += ["--precision", precision]
        shown = "mlk tune %s --target host --fn %s --dims %s --time %d%s" % (
            program, fn, dims, seconds, "" if precision == "f32" else " --precision " + precision)
        print("tuning:", shown, flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("  failed (exit %d): %s" % (r.returncode, r.stderr.strip().splitlines()[-1:]), flush=True)
            return None
        summary = json.loads(r.stdout)[0]
        outdir = os.path.join(work, "out")
        # One tuned shape: the files in DIR; several: DIR/FN-I/.
        sub = [d for d in os.listdir(outdir) if d.startswith(fn + "-")]
        with open(os.path.join(outdir, sub[0] if sub else "", "manifest.json")) as f:
            manifest = json.load(f)
        entry = {
            "program": program,
            "fn": fn,
            "fn_hash": manifest["ir_hash"],
            # The policy tuned under (a fn without products records f32 in
            # its manifest either way; the runtime matches the policy).
            "precision": precision,
            "dims": manifest["dims"],
            "machine": dict(mach, halide_target=manifest["profile"]["halide_target"]),
            "schedule": manifest["schedule"],
            "schedule_space": manifest["schedule_space"],
            "provenance": {
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                "mlk_version": manifest["versions"]["mlk"],
                "command": shown,
                "tuned_ms": round(summary["best_ms"], 4),
                # The tune's baseline: the naive schedule (trial 0).
                "naive_ms": round(summary.get("default_ms", 0), 4),
                "origin": summary.get("best_origin", ""),
                "trials": summary.get("trials", 0),
            },
        }
        print("  %.3f ms (%s), naive schedule %.3f ms" % (summary["best_ms"], entry["provenance"]["origin"],
                                                          entry["provenance"]["naive_ms"]), flush=True)
        return entry
    finally:
        shutil.rmtree(work, ignore_errors=True)


def same_slot(a, b):
    """Whether entry b replaces a: the same fn of the same program (whatever its hash now), policy, shape and machine."""
    return (a["program"] == b["program"] and a["fn"] == b["fn"] and a["precision"] == b["precision"]
            and a["dims"] == b["dims"] and a["machine"]["family_key"] == b["machine"]["family_key"]
            and a["machine"]["cores"] == b["machine"]["cores"])


def cmd_tune(args):
    mach = machine(args)
    jobs = [j for j in SETS[args.set] if not args.only or j[1] == args.only]
    precisions = args.precision.split(",")
    hashes = {}
    for program, fn, dims, seconds in jobs:
        for precision in precisions:
            if (program, precision) not in hashes:
                hashes[program, precision] = fn_hashes(args, program, precision)
            want = {"program": program, "fn": fn, "precision": precision, "machine": mach,
                    "dims": {k: int(v) for k, v in (kv.split("=") for kv in dims.split(","))}}
            have = [e for e in load_db()["entries"] if same_slot(e, want)]
            if have and have[0]["fn_hash"] == hashes[program, precision].get(fn) and not args.again:
                print("kept:   %s `%s` %s %s (tuned %s; --again tunes it again)" % (
                    program, fn, precision, dims, have[0]["provenance"]["date"]), flush=True)
                continue
            entry = tune_one(args, program, fn, dims, args.time or seconds, precision, mach)
            if entry is None:
                continue
            with locked():  # each tune is kept as soon as it ends
                db = load_db()
                db["entries"] = [e for e in db["entries"] if not same_slot(e, entry)] + [entry]
                save_db(db)
    return 0


def rules_now():
    """The schedule space of this source tree (scheduler/space_version.h)."""
    with open(os.path.join(ROOT, "scheduler", "space_version.h")) as f:
        m = re.search(r'kScheduleSpaceVersion\s*=\s*"([^"]+)"', f.read())
    return m.group(1) if m else "?"


def cmd_check(args):
    db = load_db()
    mine = machine(args)["family_key"] if not getattr(args, "all", True) else None
    kept, dropped, stale = [], [], 0
    cache = {}
    rules = rules_now()
    for e in db["entries"]:
        k = (e["program"], e["precision"])
        if k not in cache:
            cache[k] = fn_hashes(args, e["program"], e["precision"])
        now = cache[k].get(e["fn"])
        where = "%s `%s` %s %s on %s" % (e["program"], e["fn"], e["precision"], dims_text(e["dims"]),
                                         e["machine"]["cpu_model"])
        older = "" if e.get("schedule_space") == rules else " (tuned under %s, the rules are now %s: tune again)" % (
            e.get("schedule_space", "?"), rules)
        if now == e["fn_hash"]:
            kept.append(e)
            print("ok      " + where + older)
            continue
        stale += 1
        if mine is not None and e["machine"]["family_key"] != mine:
            kept.append(e)  # another family's: tuned again on a machine of it, not dropped here
            print("STALE   %s (another CPU family's: kept without --all)" % where)
        else:
            dropped.append(e)
            print("STALE   %s: tuned for program hash %s, the fn now has %s (%s)" % (
                where, e["fn_hash"][:16], (now or "none")[:16],
                "tune it again: scripts/ship_schedules.py tune --only " + e["fn"] if now else "the fn is gone"))
    if dropped and args.drop:
        with locked():
            db = load_db()
            gone = {json.dumps(e, sort_keys=True) for e in dropped}
            db["entries"] = [e for e in db["entries"] if json.dumps(e, sort_keys=True) not in gone]
            save_db(db)
        print("dropped %d stale entr%s from %s" % (len(dropped), "y" if len(dropped) == 1 else "ies", DB))
        stale -= len(dropped)
    return 1 if stale else 0


def dims_text(dims):
    return ",".join("%s=%d" % kv for kv in sorted(dims.items()))


def cmd_verify(args):
    if cmd_check(argparse.Namespace(mlk=args.mlk, drop=False, all=True)) != 0:
        return 1
    mach = machine(args)
    db = load_db()["entries"]
    # A key that drifted (a feature detected now that was not, or the key's
    # format changed) would turn this machine's entries off unnoticed.
    drift = [e for e in db if e["machine"].get("cpu_model") == mach["cpu_model"] and
             e["machine"].get("cpu_model_number") == mach["cpu_model_number"] and
             e["machine"]["family_key"] != mach["family_key"]]
    if drift:
        print("FAIL    %d entries were tuned on this CPU model (%s, model %d) under another family key:\n  %s\n"
              "this machine's is\n  %s" % (len(drift), mach["cpu_model"], mach["cpu_model_number"],
                                            drift[0]["machine"]["family_key"], mach["family_key"]))
        return 1
    mine = [e for e in db if e["machine"]["family_key"] == mach["family_key"] and e["machine"]["cores"] == mach["cores"]]
    failed, done = 0, {}
    for e in mine:
        same = [o for o in mine if (o["program"], o["fn"], o["precision"]) == (e["program"], e["fn"], e["precision"])]
        small = min(same, key=lambda o: (sorted(o["dims"].values()), dims_text(o["dims"])))["dims"]
        if (e["program"], e["fn"]) in VERIFY_AT:
            small = {k: int(v) for k, v in (kv.split("=") for kv in VERIFY_AT[e["program"], e["fn"]].split(","))}
        key = (e["program"], e["fn"], e["precision"], json.dumps(e["schedule"], sort_keys=True), dims_text(small))
        what = "%s `%s` %s tuned at %s, verified at %s" % (e["program"], e["fn"], e["precision"], dims_text(e["dims"]),
                                                           dims_text(small))
        if key in done:
            print("same    %s (the schedule of %s)" % (what, done[key]))
            continue
        done[key] = dims_text(e["dims"])
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(e["schedule"], f)
        try:
            # A policy that leaves the fn as written (no F32 product) builds
            # it as f32; one that rounds products is judged by its values as
            # the tune judged them (the policy's envelope with its outlier
            # allowance, docs/numerics.md), which `mlk verify`'s envelope on
            # adversarial inputs is not: there the build and the algorithm.
            as_written = e["precision"] == "f32" or fn_hashes(args, e["program"], "f32").get(e["fn"]) == e["fn_hash"]
            levels = "envelope" if as_written else "types,identity"
            cmd = [mlk_bin(args), "verify", os.path.join(ROOT, e["program"]), "--fn", e["fn"], "--target", "host",
                   "--dims", dims_text(small), "--schedule", f.name, "--level", levels, "--no-cache", "--no-store"]
            if not as_written:
                cmd += ["--precision", e["precision"]]
            what += " (%s)" % levels
            r = subprocess.run(cmd, capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        if r.returncode == 0:
            print("pass    " + what)
        else:
            failed += 1
            print("FAIL    %s:\n%s" % (what, (r.stdout + r.stderr).strip()[-1500:]))
    others = len(db) - len(mine)
    print("%d entries of this machine's family checked (%d failed); %d of other families are verified on theirs" % (
        len(mine), failed, others))
    return 1 if failed else 0


def cmd_families(args):
    counts = {}
    for e in load_db()["entries"]:
        k = "%s (%d cores; %s)" % (e["machine"]["cpu_model"], e["machine"]["cores"], e["machine"]["family_key"])
        counts[k] = counts.get(k, 0) + 1
    for k, n in sorted(counts.items()):
        print("%4d  %s" % (n, k))
    return 0


def main():
    global DB
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mlk", default=os.path.join(ROOT, "build", "mlk"), help="the mlk binary (default build/mlk)")
    ap.add_argument("--db", default=DB, help="the database (default schedules/shipped.json)")
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tune", help="tune a set on this machine and add its entries")
    t.add_argument("--set", choices=sorted(SETS), default="minilm")
    t.add_argument("--only", help="only this fn of the set")
    t.add_argument("--precision", default="f32,bf16", help="comma-separated policies (default f32,bf16)")
    t.add_argument("--time", type=int, help="seconds per tune instead of the set's")
    t.add_argument("--again", action="store_true", help="tune entries this machine's family already has too")
    c = sub.add_parser("check", help="say which entries still match their fn; --drop removes the others")
    c.add_argument("--drop", action="store_true")
    c.add_argument("--all", action="store_true", help="--drop other CPU families' stale entries too")
    sub.add_parser("verify", help="check, then verify this family's entries against the reference")
    sub.add_parser("families", help="the CPU families covered")
    args = ap.parse_args()
    DB = os.path.abspath(args.db)
    return {"tune": cmd_tune, "check": cmd_check, "verify": cmd_verify,
            "families": cmd_families}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
