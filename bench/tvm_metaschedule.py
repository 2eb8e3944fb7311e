"""mlk's tuner against Apache TVM MetaSchedule on the CPU, under the same wall-clock budget.

For each kernel
  - sgemm: C = A @ B, F32, 1024x1024x1024 (mlk: examples/mlp.tl fn sgemm, dims M,K,N)
  - softmax: row softmax over [4096, 4096] F32 along the last axis (mlk: examples/softmax.tl
    fn softmax_builtin, dims N,C, as bench/kernels.py; --softmax-fn softmax_by_hand for the
    written-out one); TVM gets it in TE as the usual 4 stages (row max, exp(x - max), row sum,
    divide)
it
  - tunes it with TVM MetaSchedule (`tune_tir`, xgb cost model, evolutionary search) on 2 threads
    (TVM_NUM_THREADS=2, target num-cores=2) in rounds of --per-iter trials until --budget seconds
    are spent: tune_tir has no time limit, so a measure callback (run after each round, after
    the default callbacks have stored the round in the database) raises once the budget has
    passed, and the best record is read from the script's own JSON database (a round in flight
    finishes, so it can overshoot by one round); or it stops at --trials trials. (Calling the
    task scheduler's terminate_task from the callback instead trips its
    `Check failed: !task->is_terminated` when the trial cap ends the loop in the same round.)
    The wall time of tune_tir is reported; `import tvm.s_tir.tensor_intrin` (~40 s on a busy
    2-core box, a one-off that every TuneContext does) is done before and not counted. Then compiles the best schedule (`compile_tir` + `tvm.build`), checks it against
    numpy (sgemm: rtol 1e-3, atol 1e-3 on inputs uniform in [-1, 1]; softmax: atol 1e-5) and
    times it with `time_evaluator` (number chosen so each repeat takes >= 0.1 s, repeat 10,
    median);
  - tunes it with `mlk tune FILE --fn FN --target host --dims ... --time BUDGET --trials N
    --cache TMP/cache.db` (its wall clock, which includes mlk's compile, verification and final
    round), then times the tuned artifact with `mlk run --repeat 20 --require exact` (its median,
    as bench/kernels.py does) and checks its output against numpy the same way.
Timings of the two are interleaved (3 rounds) and the best median of each kept, since this
shared machine's speed drifts.

Install (the venv the script runs under, .venv-tvm, which bench/setup_peers.sh makes from the
hash-pinned bench/requirements-tvm.txt, generated from bench/requirements-tvm.in by
scripts/lock_requirements.sh: apache-tvm 0.27.0.post1, apache-tvm-ffi 0.1.14.post1, psutil,
cloudpickle, xgboost-cpu, safetensors, numpy):
    python3 -m venv .venv-tvm
    .venv-tvm/bin/pip install --require-hashes -r bench/requirements-tvm.txt
apache-tvm-ffi is pinned because the TVM wheels set no upper bound on it, and the newest
(0.1.15.post1/.post2) segfaults in tvm::ffi::ToJSONGraph as soon as a TuneContext is created;
0.1.14.post1 works. psutil and cloudpickle are needed by MetaSchedule's worker pools, xgboost-cpu
by its default cost model (without the CUDA dependencies of plain xgboost), safetensors for mlk's
inputs.

The default LocalBuilder is replaced by one whose f_build calls tvm.build directly: the default
builder imports tvm.s_tir.tensor_intrin in every fresh worker (~40 s here), past its 30 s timeout,
so every trial would be a build error. The LLVM mcpu is llvm_get_system_cpu() (e.g. znver3),
because the wheels' LLVM turns -mcpu=native into generic (no AVX2) for their conda triple.

usage (from the repository root):
    .venv-tvm/bin/python bench/tvm_metaschedule.py BUILD_DIR [--budget SECONDS]
        [--only sgemm|softmax] [--trials N] [--per-iter N] [--small]
  --budget   tuning budget per kernel and tuner, in seconds (default 150)
  --trials   at most this many trials per kernel, for both tuners (default 1000)
  --small    smoke test shapes: 256^3 sgemm, [512, 512] softmax

Prints the CPU model and vector flags, the tvm and tvm-ffi versions, the TVM target and LLVM mcpu,
one JSON line per kernel (all numbers, errors included), then a Markdown table:
kernel | mlk time | mlk tuning wall s | TVM MetaSchedule time | TVM tuning wall s | TVM trials |
mlk/TVM speed ratio (TVM time / mlk time; above 1 means mlk's kernel is faster).
A failing step (TVM or mlk) prints its error and the script goes on with the next kernel.
"""
import argparse
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

# Before tvm is imported: its runtime thread pool reads this once.
os.environ["TVM_NUM_THREADS"] = "2"

import numpy as np  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from kernels import EX, mlk_time  # noqa: E402
from peer_timing import cpu  # noqa: E402

THREADS = 2


def kernel_list(small, softmax_fn):
    n = 256 if small else 1024
    r, c = (512, 512) if small else (4096, 4096)
    return [
        dict(name="sgemm", label=f"sgemm {n}^3", tl="mlp.tl", fn="sgemm", dims=f"M={n},K={n},N={n}",
             shape=(n, n, n), flops=2 * n ** 3),
        dict(name="softmax", label=f"softmax [{r}, {c}]", tl="softmax.tl", fn=softmax_fn, dims=f"N={r},C={c}",
             shape=(r, c), bytes=2 * 4 * r * c),
    ]


def inputs_and_reference(k, rng):
    if k["name"] == "sgemm":
        M, K, N = k["shape"]
        a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        return {"a": a, "b": b}, (a.astype(np.float64) @ b.astype(np.float64))
    x = rng.uniform(-1, 1, k["shape"]).astype(np.float32) * 4
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return {"x": x}, e / e.sum(axis=1, keepdims=True)


def check(k, got, ref):
    if k["name"] == "sgemm":
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)


# ---------------------------------------------------------------- TVM

def tvm_setup():
    import tvm
    import tvm_ffi
    try:  # tvm >= 0.25 wheels
        from tvm.s_tir import meta_schedule as ms
    except ImportError:
        from tvm import meta_schedule as ms
    try:
        from tvm.target.codegen import llvm_get_system_cpu
        mcpu = llvm_get_system_cpu()
    except Exception:  # noqa: BLE001
        mcpu = "native"
    try:
        target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": THREADS})
    except Exception:  # noqa: BLE001  (older TVM: string form)
        target = tvm.target.Target(f"llvm -mcpu={mcpu} -num-cores={THREADS}")
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    return tvm, tvm_ffi, ms, mcpu, target


def te_module(tvm, k):
    from tvm import te
    if k["name"] == "sgemm":
        M, K, N = k["shape"]
        A = te.placeholder((M, K), "float32", name="A")
        B = te.placeholder((K, N), "float32", name="B")
        r = te.reduce_axis((0, K), name="k")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
        args = [A, B, C]
    else:
        R, Cn = k["shape"]
        X = te.placeholder((R, Cn), "float32", name="X")
        r1 = te.reduce_axis((0, Cn), name="k1")
        mx = te.compute((R,), lambda i: te.max(X[i, r1], axis=r1), name="row_max")
        e = te.compute((R, Cn), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
        r2 = te.reduce_axis((0, Cn), name="k2")
        s = te.compute((R,), lambda i: te.sum(e[i, r2], axis=r2), name="row_sum")
        Y = te.compute((R, Cn), lambda i, j: e[i, j] / s[i], name="Y")
        args = [X, Y]
    func = te.create_prim_func(args).with_attr("global_symbol", "main")
    return tvm.IRModule({"main": func})


def _fast_build(mod, target, _params):
    """LocalBuilder's default_build minus `import tvm.s_tir.tensor_intrin` (~40 s in every fresh
    worker, past the builder's timeout); tensorized intrinsics are already inlined here. Returns a
    runtime.Module (tvm.build): tvm.compile's Executable is callable, so tvm-ffi would turn it
    into a Function that the export step cannot export."""
    import tvm
    try:
        from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    except ImportError:
        from tvm.tir.transform import RemoveWeightLayoutRewriteBlock
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.build(mod, target=target)


BUDGET_SPENT = "tvm_metaschedule.py: tuning budget spent"


def make_budget_callback(ms, budget_s):
    from tvm.ir.utils import derived_object

    @derived_object
    class BudgetCallback(ms.measure_callback.PyMeasureCallback):
        """Counts trials; raises BUDGET_SPENT once the wall-clock budget has passed."""

        def __init__(self):
            self.t0 = time.time()
            self.trials = self.ok = self.rounds = 0
            self.terminated = False
            self.best_s = math.inf

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            self.rounds += 1
            self.trials += len(runner_results)
            for br, rr in zip(builder_results, runner_results):
                if br.error_msg is None and rr.error_msg is None and rr.run_secs:
                    self.ok += 1
                    self.best_s = min(self.best_s, float(np.mean([float(getattr(t, "value", t)) for t in rr.run_secs])))
            if time.time() - self.t0 >= budget_s:
                self.terminated = True
                raise RuntimeError(BUDGET_SPENT)

    return BudgetCallback()


def tvm_tune(env, k, args, work):
    tvm, _, ms, _, target = env
    mod = te_module(tvm, k)
    work_dir = tempfile.mkdtemp(prefix=f"ms-{k['name']}-", dir=work)
    builder = ms.builder.LocalBuilder(f_build=_fast_build, max_workers=THREADS, timeout_sec=120.0)
    runner = ms.runner.LocalRunner(timeout_sec=60.0)
    database = ms.database.Database.create("json", work_dir=work_dir, module_equality="structural")
    cb = make_budget_callback(ms, args.budget)
    # The defaults (add to database, remove build artifact, update cost model) run first.
    callbacks = list(ms.measure_callback.MeasureCallback.create("default")) + [cb]
    t0 = time.time()  # cb's own clock started a moment ago, in its __init__
    try:
        ms.tune_tir(
            mod=mod, target=target, work_dir=work_dir,
            max_trials_global=args.trials, num_trials_per_iter=min(args.per_iter, args.trials),
            builder=builder, runner=runner, database=database, cost_model="xgb",
            measure_callbacks=callbacks, num_tuning_cores=THREADS, seed=0,
        )
    except Exception as e:  # noqa: BLE001
        if not (cb.terminated and BUDGET_SPENT in str(e)):
            raise
    finally:
        tune_s = time.time() - t0
        try:
            runner.pool.shutdown()
        except Exception:  # noqa: BLE001
            pass
    sch = ms.tir_integration.compile_tir(database, mod, target)
    if sch is None:
        raise RuntimeError(f"no valid schedule in the database after {cb.trials} trials ({cb.ok} ok)")
    lib = tvm.build(sch.mod, target=target)
    return lib, dict(tvm_tune_s=tune_s, tvm_trials=cb.trials, tvm_trials_ok=cb.ok, tvm_rounds=cb.rounds,
                     tvm_budget_stop=cb.terminated, tvm_tuning_best_ms=cb.best_s * 1e3, tvm_work_dir=work_dir)


def tvm_arrays(tvm, k, inputs):
    dev = tvm.cpu(0)
    mk = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    ins = [mk(inputs[n], dev) for n in (("a", "b") if k["name"] == "sgemm" else ("x",))]
    M = k["shape"][0]
    N = k["shape"][2] if k["name"] == "sgemm" else k["shape"][1]
    out = mk(np.zeros((M, N), np.float32), dev)
    return dev, ins + [out]


def tvm_time_ms(lib, dev, arrs):
    probe = lib.time_evaluator("main", dev, number=1, repeat=3)(*arrs)
    t1 = max(float(np.min(probe.results)), 1e-7)
    number = max(1, math.ceil(0.1 / t1))
    res = lib.time_evaluator("main", dev, number=number, repeat=10)(*arrs)
    return float(np.median(res.results)) * 1e3


# ---------------------------------------------------------------- mlk

def mlk_tune(mlk, k, args, store):
    cmd = [mlk, "tune", os.path.join(EX, k["tl"]), "--fn", k["fn"], "--target", "host", "--dims", k["dims"],
           "--time", str(max(1, round(args.budget))), "--trials", str(args.trials), "--cache", store, "--json", "-q"]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    tune_s = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError(f"mlk tune exit {p.returncode}: {(p.stderr or p.stdout)[-1500:]}")
    summary = json.loads(p.stdout.strip().splitlines()[-1])[0]
    return dict(mlk_tune_s=tune_s, mlk_trials=summary.get("trials"), mlk_tuning_best_ms=summary.get("best_ms"),
                mlk_default_ms=summary.get("default_ms"), mlk_winner=summary.get("best_origin"))


# ---------------------------------------------------------------- main

def fmt_ms(v):
    return f"{v:.3f} ms" if isinstance(v, float) and math.isfinite(v) else "failed"


def fmt_s(v):
    return f"{v:.0f}" if isinstance(v, float) else "failed"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("--budget", type=float, default=150.0, help="tuning seconds per kernel and tuner")
    ap.add_argument("--only", choices=["sgemm", "softmax"])
    ap.add_argument("--trials", type=int, default=1000, help="trial cap per kernel, both tuners")
    ap.add_argument("--per-iter", type=int, default=32, help="MetaSchedule trials per round")
    ap.add_argument("--small", action="store_true", help="smoke shapes: 256^3 sgemm, [512, 512] softmax")
    ap.add_argument("--softmax-fn", default="softmax_builtin", help="fn of examples/softmax.tl for mlk")
    args = ap.parse_args()
    mlk = os.path.join(os.path.abspath(args.build_dir), "mlk")
    if not os.access(mlk, os.X_OK):
        sys.exit(f"no mlk binary at {mlk}")

    name, flags = cpu()
    print(f"CPU: {name}; flags: {' '.join(flags) or 'none of avx2/fma/avx512'}; TVM_NUM_THREADS={THREADS}")
    env = None
    try:
        env = tvm_setup()
        tvm, tvm_ffi, _, mcpu, target = env
        print(f"tvm {tvm.__version__}, tvm-ffi {tvm_ffi.__version__}; LLVM mcpu {mcpu}; target {target}")
        t0 = time.time()
        import tvm.s_tir.tensor_intrin  # noqa: F401  the one-off import every TuneContext does
        print(f"(import tvm.s_tir.tensor_intrin: {time.time() - t0:.1f} s, not counted in tuning wall)")
    except Exception:  # noqa: BLE001
        print("TVM setup failed; only mlk is run:\n" + traceback.format_exc())
        env = None
    print(f"budget {args.budget:g} s per kernel and tuner, at most {args.trials} trials\n", flush=True)

    work = tempfile.mkdtemp(prefix="mlk-vs-tvm-")
    store = os.path.join(work, "cache.db")
    rng = np.random.default_rng(0)
    rows = []
    for k in kernel_list(args.small, args.softmax_fn):
        if args.only and k["name"] != args.only:
            continue
        print(f"== {k['label']}", flush=True)
        row = dict(kernel=k["label"], mlk_fn=k["fn"])
        inputs, ref = inputs_and_reference(k, rng)
        inp = os.path.join(work, f"{k['name']}.in.safetensors")
        save_file(inputs, inp)

        mlk_ok = False
        try:
            row.update(mlk_tune(mlk, k, args, store))
            mlk_ok = True
            print(f"mlk tune: {row['mlk_tune_s']:.1f} s wall, {row['mlk_trials']} trials, "
                  f"best {row['mlk_tuning_best_ms']} ms", flush=True)
        except Exception as e:  # noqa: BLE001
            row["mlk_error"] = str(e)
            print(f"mlk tune failed: {e}", flush=True)

        lib = arrs = dev = None
        if env is not None:
            try:
                lib, info = tvm_tune(env, k, args, work)
                row.update(info)
                print(f"TVM tune_tir: {info['tvm_tune_s']:.1f} s wall, {info['tvm_trials']} trials "
                      f"({info['tvm_trials_ok']} ok, {info['tvm_rounds']} rounds, "
                      f"{'stopped by budget' if info['tvm_budget_stop'] else 'trial cap reached'})", flush=True)
                dev, arrs = tvm_arrays(env[0], k, inputs)
                lib["main"](*arrs)
                check(k, arrs[-1].numpy(), ref)
                print("TVM result matches numpy", flush=True)
            except Exception:  # noqa: BLE001
                row["tvm_error"] = traceback.format_exc(limit=3)[-2000:]
                print("TVM failed:\n" + traceback.format_exc(), flush=True)
                lib = None
        else:
            row["tvm_error"] = "TVM setup failed"

        # Interleaved timing rounds, best median of each.
        mlk_ms = tvm_ms = math.inf
        if mlk_ok:
            try:
                kk = dict(k, run_dims=[])
                for rnd in range(3):
                    mlk_ms = min(mlk_ms, mlk_time(mlk, kk, inp, ["--cache", store, "--require", "exact"])[0])
                    if rnd == 0:
                        check(k, load_file(os.path.join(work, "out.safetensors"))["output"], ref)
                        print("mlk result matches numpy", flush=True)
                    if lib is not None:
                        try:
                            tvm_ms = min(tvm_ms, tvm_time_ms(lib, dev, arrs))
                        except Exception:  # noqa: BLE001
                            row["tvm_error"] = traceback.format_exc(limit=3)[-2000:]
                            print("TVM timing failed:\n" + traceback.format_exc(), flush=True)
                            lib = None
            except Exception as e:  # noqa: BLE001
                row["mlk_error"] = str(e)[-2000:]
                print(f"mlk run failed: {e}", flush=True)
                mlk_ms = math.inf
        if lib is not None and not math.isfinite(tvm_ms):
            try:
                tvm_ms = min(tvm_time_ms(lib, dev, arrs) for _ in range(3))
            except Exception:  # noqa: BLE001
                row["tvm_error"] = traceback.format_exc(limit=3)[-2000:]
                print("TVM timing failed:\n" + traceback.format_exc(), flush=True)
        row["mlk_ms"], row["tvm_ms"] = mlk_ms, tvm_ms
        rows.append(row)
        print(json.dumps({key: (None if isinstance(v, float) and not math.isfinite(v) else v)
                          for key, v in row.items()}), flush=True)

    print("\n| kernel | mlk time | mlk tuning wall s | TVM MetaSchedule time | TVM tuning wall s | TVM trials "
          "| mlk/TVM speed ratio (TVM time / mlk time) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ratio = (f"{r['tvm_ms'] / r['mlk_ms']:.2f}x"
                 if math.isfinite(r["tvm_ms"]) and math.isfinite(r["mlk_ms"]) else "n/a")
        trials = r.get("tvm_trials", "failed")
        print(f"| {r['kernel']} | {fmt_ms(r['mlk_ms'])} | {fmt_s(r.get('mlk_tune_s'))} | {fmt_ms(r['tvm_ms'])} "
              f"| {fmt_s(r.get('tvm_tune_s'))} | {trials} | {ratio} |")


if __name__ == "__main__":
    main()
