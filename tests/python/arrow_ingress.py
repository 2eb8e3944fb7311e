"""Dataframe arguments from Python: pyarrow objects through the Arrow C stream interface.

usage: arrow_ingress.py EXAMPLES_DIR PYTHON_PACKAGE_DIR

`score` of examples/features.tl called with a pyarrow.Table (and a
RecordBatchReader) in the place of its Dataframe parameter, against numpy.
A one-chunk table is taken zero-copy (the column's data pointer is Arrow's
buffer, `copied` is False), a sliced one too (at its offset), a two-chunk
table with one copy (`copied` True); the columns stay valid after the table
is gone. Tables as pa.table({..}) makes them (nullable fields) are read
while no row is null, and pandas' (Table.from_pandas) when pandas is
importable (else the case says it is skipped); Bool and BF16 columns (bf16
as marked uint16, and as a registered extension type) through the JIT and
DLPack. Refused with their messages
(ValueError, TypeError): a refinement failing at a row, a null row in a
nullable field, a missing column, a list size against the weights, an
object that is not a table, a BF16 rule. Category[I32, K] columns from
dictionary_encode() (int32, int8 and int16 indices), their dictionaries, and
their refusals (a dictionary that changes between batches, a null code, K
against dims=, a plain int32 column). The C++ entry point
(arrow_ipc::read_c_stream) is the one the module calls.
"""
import gc
import os
import sys

import numpy as np
import pyarrow as pa

EXAMPLES, PKG = sys.argv[1], sys.argv[2]
if PKG != "-":  # "-": the installed mlk package
    sys.path.insert(0, PKG)
import mlk  # noqa: E402

failures = []
ops = mlk.load(os.path.join(EXAMPLES, "features.tl"))
rng = np.random.default_rng(3)
N, D, H = 300, 16, 5
emb = (rng.standard_normal((N, D)) * 0.5).astype(np.float16)
sess = rng.integers(1, 40, N).astype(np.int32)
uid = np.arange(N, dtype=np.int64) * 7
w1 = (rng.standard_normal((D, H)) * 0.3).astype(np.float32)
b1 = rng.standard_normal(H).astype(np.float32)
w2 = rng.standard_normal((H, 1)).astype(np.float32)
SCHEMA = pa.schema([pa.field("user_id", pa.int64(), False), pa.field("session_len", pa.int32(), False),
                    pa.field("embedding", pa.list_(pa.float16(), D), False)])


def table(u, s, e, schema=SCHEMA):
    return pa.table([pa.array(u), pa.array(s), pa.FixedSizeListArray.from_arrays(pa.array(e.reshape(-1)), e.shape[1])],
                    schema=schema)


def want(s, e):
    return np.maximum(e.astype(np.float64) @ w1 + b1 + 0.01 * s.astype(np.float64)[:, None], 0) @ w2


def check(name, got, expect):
    got = np.from_dlpack(got) if not isinstance(got, np.ndarray) else got
    if got.shape != expect.shape or not np.allclose(got, expect, rtol=1e-3, atol=1e-3):
        failures.append(f"{name}: differs from numpy (shape {got.shape})")
    else:
        print(f"ok {name}: {got.shape} matches numpy")


t = table(uid, sess, emb)
check("table", ops.score(t, w1, b1, w2), want(sess, emb))
cols = mlk.arrow.columns(ops.score, t)
emb_buf = t.column("embedding").chunks[0].values.buffers()[1].address
if [c.copied for c in cols] != [False, False, False] or cols[2].data_ptr != emb_buf:
    failures.append(f"zero_copy: copied {[c.copied for c in cols]}, pointer {cols[2].data_ptr:#x} vs {emb_buf:#x}")
else:
    print("ok zero_copy: one chunk, every column viewed in Arrow's memory")
del t
gc.collect()
if not np.array_equal(np.from_dlpack(cols[2]), emb):
    failures.append("lifetime: the column changed after the table was dropped")
else:
    print("ok lifetime: a column outlives its table")

sl = table(uid, sess, emb).slice(17, 100)
scols = mlk.arrow.columns(ops.score, sl)
if scols[2].copied or not np.array_equal(np.from_dlpack(scols[2]), emb[17:117]):
    failures.append(f"sliced: copied {scols[2].copied}")
else:
    print("ok sliced: an offset slice viewed at its offset")
check("sliced_call", ops.score(sl, w1, b1, w2), want(sess[17:117], emb[17:117]))

two = pa.concat_tables([table(uid[:100], sess[:100], emb[:100]), table(uid[100:], sess[100:], emb[100:])])
tcols = mlk.arrow.columns(ops.score, two)
if not all(c.copied for c in tcols):
    failures.append("chunks: two chunks not copied")
else:
    print("ok chunks: two chunks, one copy")
check("chunks_call", ops.score(two, w1, b1, w2), want(sess, emb))
reader = pa.RecordBatchReader.from_batches(SCHEMA, table(uid, sess, emb).to_batches(max_chunksize=64))
check("reader", ops.score(reader, w1, b1, w2), want(sess, emb))
check("columns_as_tensors", ops.score(uid, sess, emb, w1, b1, w2), want(sess, emb))


def refused(name, exc, text, *args):
    try:
        ops.score(*args)
    except exc as e:
        if text in str(e):
            print(f"ok {name}: {e}")
            return
        failures.append(f"{name}: message {str(e)!r} lacks {text!r}")
        return
    except Exception as e:  # noqa: BLE001
        failures.append(f"{name}: {type(e).__name__}: {e}")
        return
    failures.append(f"{name}: accepted")


bad = sess.copy()
bad[257] = 0
refused("refinement", ValueError, "argument 0 `df` of `score`: session_len >= 1 fails at row 257: value 0",
        table(uid, bad, emb), w1, b1, w2)
# Tables as they come: pa.table({..}) makes nullable fields. Read (zero-copy) while no row
# is null; the first null row is refused by its number.
plain = pa.table({"user_id": uid, "session_len": sess,
                  "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1)), D)})
if not all(fl.nullable for fl in plain.schema):
    failures.append("nullable_fields: pa.table made a non-nullable field")
check("nullable_fields", ops.score(plain, w1, b1, w2), want(sess, emb))
if any(c.copied for c in mlk.arrow.columns(ops.score, plain)):
    failures.append("nullable_fields: a column without nulls was copied")
with_null = pa.table({"user_id": uid, "session_len": pa.array([None if i == 123 else int(v) for i, v in enumerate(sess)],
                                                              pa.int32()),
                      "embedding": plain.column("embedding")})
refused("nullable_field_null", ValueError,
        "argument 0 `df` of `score`: column `session_len` is declared non-nullable, but row 123 is null",
        with_null, w1, b1, w2)
try:
    import pandas as pd
except ImportError:
    pd = None
    print("skip pandas: pandas is not importable in this environment; Table.from_pandas not tested")
if pd is not None:
    frame = pd.DataFrame({"user_id": uid, "session_len": sess, "embedding": list(emb)})
    nullable_schema = pa.schema([pa.field(fl.name, fl.type) for fl in SCHEMA])
    from_pandas = pa.Table.from_pandas(frame, schema=nullable_schema, preserve_index=False)
    check("from_pandas", ops.score(from_pandas, w1, b1, w2), want(sess, emb))
    frame.loc[7, "session_len"] = None  # the column becomes float64 with NaN: refused by type
    refused("from_pandas_null", ValueError, "row 7 is null",
            pa.Table.from_pandas(frame, schema=nullable_schema, preserve_index=False, safe=False), w1, b1, w2)
missing = pa.table([pa.array(uid), pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1)), D)],
                   schema=pa.schema([SCHEMA.field(0), SCHEMA.field(2)]))
refused("missing", ValueError, "the stream has no column `session_len` (declared column 1); its columns: user_id, embedding",
        missing, w1, b1, w2)
refused("list_size_vs_weights", ValueError, "`score`: w1.shape[0] = 4 but D = 16, bound by df_embedding.shape[1]",
        table(uid, sess, emb), w1[:4], b1, w2)
try:
    ops.score(table(uid, sess, emb), w1, b1, w2, dims={"D": 4})
    failures.append("list_size_vs_dims: accepted")
except ValueError as e:
    text = "column `embedding`: declared FixedSizeList[F16, D] with D = 4, the stream has fixed_size_list<item: halffloat>[16]"
    (print(f"ok list_size_vs_dims: {e}") if text in str(e) else failures.append(f"list_size_vs_dims: {e}"))
refused("not_a_table", TypeError, "argument 0 `df` of `score`: a list, not a table", [1, 2, 3], w1, b1, w2)

# Bool and BF16 columns: Arrow bool (bit-packed, unpacked into one byte per value: copied)
# and BF16 as uint16 bits marked mlk.bfloat16 (viewed in place), through the JIT.
import tempfile  # noqa: E402

import torch  # noqa: E402

SRC = """public fn masked [N](df: Dataframe[N, Schema{ flag: Bool, h: BF16 where h > -100.0, x: F32 }]) -> Tensor[F32, [N]] =
  where(to_tensor(df.flag), to_tensor(df.x) * cast(to_tensor(df.h), F32), full(F32, [N], 0.0))
"""
with tempfile.NamedTemporaryFile("w", suffix=".tl", delete=False) as fh:
    fh.write(SRC)
bops = mlk.load(fh.name)
M = 77
flag = rng.random(M) < 0.5
hv = rng.standard_normal(M).astype(np.float32) * 4
hbits = mlk.arrow.bf16_bits(hv)
hround = (hbits.astype(np.uint32) << 16).view(np.float32)
xv = rng.standard_normal(M).astype(np.float32)
bt = pa.table([pa.array(flag), pa.array(hbits, pa.uint16()), pa.array(xv)],
              schema=pa.schema([pa.field("flag", pa.bool_()), mlk.arrow.bf16_field("h"), pa.field("x", pa.float32())]))
check("bool_bf16", bops.masked(bt), np.where(flag, xv * hround, 0).astype(np.float32))
bcols = mlk.arrow.columns(bops.masked, bt)
got = [(c.name, c.dtype, c.copied) for c in bcols]
if got != [("flag", "Bool", True), ("h", "BF16", False), ("x", "F32", False)]:
    failures.append(f"bool_bf16 columns: {got}")
tf, th = torch.from_dlpack(bcols[0]), torch.from_dlpack(bcols[1])
if tf.dtype != torch.bool or not np.array_equal(tf.numpy(), flag):
    failures.append(f"bool_bf16: the Bool column through DLPack: {tf.dtype}")
elif th.dtype != torch.bfloat16 or not np.array_equal(th.float().numpy(), hround):
    failures.append(f"bool_bf16: the BF16 column through DLPack: {th.dtype}")
else:
    print("ok bool_bf16 columns: torch.bool and torch.bfloat16 through DLPack, exact")
bad_h = hbits.copy()
bad_h[40] = mlk.arrow.bf16_bits([-200.0])[0]
bad_t = bt.set_column(1, mlk.arrow.bf16_field("h"), pa.array(bad_h, pa.uint16()))
try:
    bops.masked(bad_t)
    failures.append("bf16_rule: accepted")
except ValueError as e:
    (print(f"ok bf16_rule: {e}") if "h > -100.0 fails at row 40: value -200" in str(e)
     else failures.append(f"bf16_rule: {e}"))
os.unlink(fh.name)


# BF16 as a registered extension type (pa.ExtensionType "mlk.bfloat16" on uint16): accepted
# the same, in a column and as a FixedSizeList's elements, viewed in place.
class _BF16(pa.ExtensionType):
    def __init__(self):
        super().__init__(pa.uint16(), "mlk.bfloat16")

    def __arrow_ext_serialize__(self):
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


pa.register_extension_type(_BF16())
with tempfile.NamedTemporaryFile("w", suffix=".tl", delete=False) as fh:
    fh.write("public fn widen [N](df: Dataframe[N, Schema{ h: BF16, e: FixedSizeList[BF16, 2] }]) -> Tensor[F32, [N]] =\n"
             "  cast(to_tensor(df.h), F32)\n")
eops = mlk.load(fh.name)
os.unlink(fh.name)
ext = pa.table({"h": pa.ExtensionArray.from_storage(_BF16(), pa.array(hbits, pa.uint16())),
                "e": pa.FixedSizeListArray.from_arrays(
                    pa.ExtensionArray.from_storage(_BF16(), pa.array(np.repeat(hbits, 2), pa.uint16())), 2)})
check("bf16_extension_type", eops.widen(ext), hround)
ecols = mlk.arrow.columns(eops.widen, ext)
if [(c.dtype, c.copied) for c in ecols] != [("BF16", False), ("BF16", False)]:
    failures.append(f"bf16_extension_type columns: {[(c.dtype, c.copied) for c in ecols]}")

# Category[I32, K]: dictionary-encoded columns (pa.array(..).dictionary_encode()); the tensor is
# the codes (int8 and int16 indices widened to int32, copied; int32 viewed), K is the
# dictionary's size, `dictionary` the values as text; a dictionary that differs between
# batches is refused by batch, a null code by row.
with tempfile.NamedTemporaryFile("w", suffix=".tl", delete=False) as fh:
    fh.write("public fn lookup [N, K, D](df: Dataframe[N, Schema{ c: Category[I32, K], x: F32 }],\n"
             "    emb: Tensor[F32, [K, D]]) -> Tensor[F32, [N, D]] =\n"
             "  gather(emb, to_tensor(df.c), axis=0) * broadcast(to_tensor(df.x), [N, D], axes=[0])\n"
             "public fn counts [N, K](df: Dataframe[N, Schema{ c: Category[I32, K], x: F32 }]) -> Tensor[F32, [K]] =\n"
             "  let hit = broadcast(to_tensor(df.c), [N, K], axes=[0]) == iota(I32, [N, K], axis=1)\n"
             "  sum(where(hit, broadcast(to_tensor(df.x), [N, K], axes=[0]), full(F32, [N, K], 0.0)), axes=[0])\n")
cops = mlk.load(fh.name)
os.unlink(fh.name)
words = ["red", "green", "blue", "green", "red", "red", "blue"]
cx = np.arange(1, len(words) + 1, dtype=np.float32)
ctab = pa.table({"c": pa.array(words).dictionary_encode(), "x": cx})
cemb = rng.standard_normal((3, 4)).astype(np.float32)
codes = np.array([["red", "green", "blue"].index(w) for w in words])
check("category", cops.lookup(ctab, cemb), cemb[codes] * cx[:, None])
# K in no tensor's shape: the table's dictionary binds it (and dims= must agree).
check("category_k_from_the_dictionary", cops.counts(ctab), np.array([cx[codes == k].sum() for k in range(3)], np.float32))
ccols = mlk.arrow.columns(cops.lookup, ctab)
got = (ccols[0].dtype, ccols[0].shape, ccols[0].copied, ccols[0].dictionary, ccols[1].dictionary)
if got != ("I32", (7,), False, ["red", "green", "blue"], None) or not np.array_equal(np.from_dlpack(ccols[0]), codes):
    failures.append(f"category columns: {got}, codes {np.from_dlpack(ccols[0])}")
else:
    print("ok category columns: int32 codes viewed in place, the dictionary as text")
for itype in (pa.int8(), pa.int16()):
    narrow = pa.table({"c": pa.DictionaryArray.from_arrays(pa.array(codes, itype), pa.array(["red", "green", "blue"])),
                       "x": cx})
    ncol = mlk.arrow.columns(cops.lookup, narrow)[0]
    if (ncol.dtype, ncol.copied) != ("I32", True) or not np.array_equal(np.from_dlpack(ncol), codes):
        failures.append(f"category {itype}: {(ncol.dtype, ncol.copied)}")
    else:
        print(f"ok category {itype}: indices widened to I32 (one copy)")
    check(f"category_{itype}", cops.lookup(narrow, cemb), cemb[codes] * cx[:, None])
other = pa.table({"c": pa.array(["blue", "blue"]).dictionary_encode(), "x": cx[:2]})
changing = pa.RecordBatchReader.from_batches(ctab.schema, ctab.to_batches() + other.to_batches())
try:
    cops.lookup(changing, cemb)
    failures.append("category_changing_dictionary: accepted")
except ValueError as e:
    text = ("column `c`: record batch 1 has another dictionary (1 values) than record batch 0 (3 values): "
            "a delta or a replacement; a Category column has one dictionary per stream")
    (print(f"ok category_changing_dictionary: {e}") if text in str(e)
     else failures.append(f"category_changing_dictionary: {e}"))
nulled = pa.table({"c": pa.array(["red", None, "blue"]).dictionary_encode(), "x": cx[:3]})
try:
    cops.lookup(nulled, cemb)
    failures.append("category_null: accepted")
except ValueError as e:
    (print(f"ok category_null: {e}") if "column `c` is declared non-nullable, but row 1 is null" in str(e)
     else failures.append(f"category_null: {e}"))
try:
    cops.lookup(ctab, cemb, dims={"K": 4})
    failures.append("category_size: accepted")
except ValueError as e:
    text = "column `c`: declared Category[I32, K] with K = 4, the stream's dictionary has 3 values"
    (print(f"ok category_size: {e}") if text in str(e) else failures.append(f"category_size: {e}"))
plain_c = pa.table({"c": pa.array(codes, pa.int32()), "x": cx})
try:
    cops.lookup(plain_c, cemb)
    failures.append("category_not_dictionary: accepted")
except ValueError as e:
    text = "column `c`: declared Category[I32, K], the stream has int32 (a Category column is dictionary-encoded"
    (print(f"ok category_not_dictionary: {e}") if text in str(e) else failures.append(f"category_not_dictionary: {e}"))

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed" if failures else "arrow_ingress: all cases passed")
sys.exit(1 if failures else 0)
