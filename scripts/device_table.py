"""The table of scripts/device_check.sh --import: mlk's winners (as stored
from mlk-measure's measurements) against the peers measured in the same run
on the same device: cuBLAS for the GEMMs, the device-to-device copy
bandwidth for the memory-bound kernels (bytes = every input read once and
the output written once, from the candidate set's shapes).

usage: device_table.py RESULTS KERNELS_TXT
Prints Markdown on stdout; exits 1 when a kernel has no stored winner.
"""
import json
import os
import sys

DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i32": 4, "i64": 8, "i8": 1, "u8": 1, "bool": 1}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tensor_bytes(spec):
    n = 1
    for e in spec["shape"]:
        n *= e
    return n * DTYPE_BYTES.get(spec["dtype"].lower(), 4)


def main(results, kernels_txt):
    set_dir = os.path.dirname(os.path.abspath(kernels_txt))
    peers = load(os.path.join(results, "peers.json")) or {}
    bw = peers.get("bandwidth", {})
    device, ok = None, True
    rows = []
    for line in open(kernels_txt):
        name, _prog, fn, dims = line.strip().split("|")
        imported = load(os.path.join(results, name + ".import.json"))
        measured = load(os.path.join(results, name + ".json")) or {}
        cset = load(os.path.join(set_dir, "kernels", name, "candidates.json")) or {}
        passed = sum(r["verdict"] == "ok" for r in measured.get("results", []))
        total = len(measured.get("results", []))
        device = device or measured.get("device")
        if not imported:
            rows.append(f"| {name} | {dims} | no winner stored | | {passed}/{total} | | |")
            ok = False
            continue
        w = imported[0]
        best, default = w["best_ms"], w["default_ms"]
        if fn.endswith("gemm"):
            d = dict(kv.split("=") for kv in dims.split(","))
            flops = 2 * int(d["M"]) * int(d["K"]) * int(d["N"])
            mine = f"{flops / best / 1e9:.1f} TFLOP/s"
            peer = peers.get("gemm_f16" if fn == "hgemm" else "gemm_f32", {})
            if peer.get("ran"):
                ref = f"cuBLAS {peer['tflops']:.1f} TFLOP/s ({peer['best_ms']:.3f} ms)"
                ratio = f"{peer['best_ms'] / best:.2f}"
            else:
                ref, ratio = "cuBLAS: " + peer.get("why", "not run"), "—"
        else:
            moved = sum(tensor_bytes(s) for s in cset["timing"]["inputs"]) + tensor_bytes(cset["timing"]["output"])
            gbs = moved / best / 1e6
            mine = f"{gbs:.0f} GB/s"
            if bw.get("ran"):
                ref = f"copy {bw['gb_per_s']:.0f} GB/s"
                ratio = f"{gbs / bw['gb_per_s']:.2f}"
            else:
                ref, ratio = "copy: " + bw.get("why", "not run"), "—"
        rows.append(f"| {name} | {dims} | {best:.3f} ms ({mine}) | {default:.3f} ms | {passed}/{total} | {ref} | {ratio} |")
    print(f"Device: {device or 'unknown'}; mlk-measure medians, peers best of 20.\n")
    print("| kernel | shape | mlk winner | mlk default schedule | candidates passed | peer | mlk / peer |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: |")
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
