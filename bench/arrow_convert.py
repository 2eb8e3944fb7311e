"""Dataframe ingress: a FixedSizeList[F16, D] column to a tensor, against memcpy,
and mlk's validation against pyarrow's own validate(full=True).

usage: .venv/bin/python bench/arrow_convert.py [--rows 1000000] [--dim 384] [--reps 7] [--json OUT]

The issue's target (docs/interop/arrow.md, "Performance"): converting
1,000,000 rows of FixedSizeList[F16, 384] (768 MB) to a tensor at >= 0.8x
memcpy bandwidth; zero-copy makes the conversion itself near free. What is
timed, each the median of --reps runs:

- `zero_copy`: mlk's whole read of a one-chunk pyarrow Table through the
  Arrow C stream interface (mlk._arrow): the schema check, Arrow's
  ValidateFull of the batch, mlk's value checks, the tensor as a view, and
  np.from_dlpack of it. Its "bandwidth" is the column's bytes over that time.
- `one_copy`: the same on a table of two chunks, which needs one copy.
- `memcpy`: np.copyto of the column's bytes into a preallocated array.
- `pyarrow_validate`: table.validate(full=True) on the one-chunk table.

Validation is part of every mlk read (it cannot be turned off), so the
conversion rows include it; `pyarrow_validate` is the peer for that part.
Not run in CI at full size: the lead runs it (a smoke run uses --rows 1000).
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import cpu, median_ms  # noqa: E402

import mlk  # noqa: E402

PROGRAM = """
public fn embeddings [N, D](df: Dataframe[N, Schema{ embedding: FixedSizeList[F16, D] }]) -> Tensor[F16, [N, D]] =
  to_tensor(df.embedding)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", help="write the results here too")
    a = ap.parse_args()

    with tempfile.NamedTemporaryFile("w", suffix=".tl", delete=False) as fh:
        fh.write(PROGRAM)
        tl = fh.name
    fn = mlk.load(tl).embeddings
    os.unlink(tl)

    rng = np.random.default_rng(0)
    values = rng.standard_normal(a.rows * a.dim).astype(np.float16)
    schema = pa.schema([pa.field("embedding", pa.list_(pa.float16(), a.dim), nullable=False)])
    col = pa.FixedSizeListArray.from_arrays(pa.array(values), a.dim)
    one = pa.table([col], schema=schema)
    half = a.rows // 2
    two = pa.concat_tables([one.slice(0, half), one.slice(half)])  # two chunks: one copy
    nbytes = values.nbytes

    def read(table):
        (c,) = mlk.arrow.columns(fn, table)
        return np.from_dlpack(c), c.copied

    got, copied = read(one)
    assert not copied and np.array_equal(got.reshape(-1), values), "zero-copy read differs"
    got2, copied2 = read(two)
    assert copied2 and np.array_equal(got2.reshape(-1), values), "one-copy read differs"
    dst = np.empty_like(values)

    rows = {
        "zero_copy": median_ms(lambda: read(one), a.reps),
        "one_copy": median_ms(lambda: read(two), a.reps),
        "memcpy": median_ms(lambda: np.copyto(dst, values), a.reps),
        "pyarrow_validate": median_ms(lambda: one.validate(full=True), a.reps),
    }
    name, flags = cpu()
    print(f"# {a.rows} rows of FixedSizeList[F16, {a.dim}] ({nbytes / 1e6:.1f} MB); {name} {' '.join(flags)}")
    print(f"{'what':<18} {'ms':>10} {'GB/s':>8} {'x memcpy':>9}")
    for k, ms in rows.items():
        gbs = nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("inf")
        ratio = rows["memcpy"] / ms if ms > 0 else float("inf")
        print(f"{k:<18} {ms:>10.3f} {gbs:>8.2f} {ratio:>9.2f}")
    print(f"validation: mlk's whole zero-copy read takes {rows['zero_copy'] / rows['pyarrow_validate']:.2f}x "
          "pyarrow's validate(full=True)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rows": a.rows, "dim": a.dim, "bytes": nbytes, "cpu": name, "ms": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
