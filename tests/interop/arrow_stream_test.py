"""The Arrow IPC reader (interop/arrow_reader.h) on streams written here by pyarrow.

Usage: arrow_stream_test.py PATH/TO/arrow_tool TMPDIR
Exits 0 when every case passes. Needs pyarrow==26.0.1 (scripts/requirements.txt).

Accepted streams (several batches, nulls, sliced arrays, an empty table, ZSTD
with --allow-compressed) must give exactly pyarrow's values; refused ones
(schema mismatches, nulls where none may be, a failed refinement, truncation,
a bad continuation marker, flipped bytes, an over-long buffer or body length,
compression, a dictionary column, trailing bytes, a second schema, metadata
V4) must exit 1 with their named error. A Category column (dictionary batches,
int16 indices) reads back as I32 codes with its dictionary and K; its
refusals (ZSTD unless allowed, int64 indices, a delta, a size) are named. No
damaged stream may crash the
reader (exit 0 or 1 with a message that names the file).
"""
import json
import os
import random
import struct
import subprocess
import sys

import pyarrow as pa

TOOL, TMP = sys.argv[1], sys.argv[2]
os.makedirs(TMP, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def f(name, typ, nullable=False):
    return pa.field(name, typ, nullable=nullable)


def fsl(values, size, mask=None, dtype=pa.float16()):
    return pa.FixedSizeListArray.from_arrays(pa.array(values, dtype), size, mask=mask)


def stream_bytes(schema, batches, **opts):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(**opts) if opts else None) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def write(name, data):
    path = os.path.join(TMP, name + ".arrows")
    with open(path, "wb") as fh:
        fh.write(data)
    return path


def run(path, decl, *extra):
    p = subprocess.run([TOOL, "read", path, json.dumps(decl), *extra], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr.strip()


def accepted(name, data, decl, *extra):
    rc, out, err = run(write(name, data), decl, *extra)
    check(rc == 0, f"{name}: accepted (rc {rc}, {err})")
    return json.loads(out) if rc == 0 else None


def refused(name, data, decl, *texts):
    path = write(name, data)
    rc, out, err = run(path, decl)
    check(rc == 1, f"{name}: refused with exit 1 (rc {rc}, stderr {err!r})")
    if not texts[0].startswith("schema declaration: "):  # the declaration's fault, not the file's
        check(err.startswith(path + ": "), f"{name}: the message names the file: {err!r}")
    for t in texts:
        check(t in err, f"{name}: message has {t!r}: {err!r}")


def py_values(arr):
    """Row-major values of a pyarrow column as arrow_tool prints them; null rows as zeros."""
    out = []
    width = arr.type.list_size if pa.types.is_fixed_size_list(arr.type) else 1
    for v in arr.to_pylist():
        items = [0] * width if v is None else (v if isinstance(v, list) else [v])
        out.extend(items)
    return out


def same_table(name, got, table):
    if got is None:
        return
    check(got["rows"] == table.num_rows, f"{name}: rows {got['rows']} != {table.num_rows}")
    for col, field in zip(got["columns"], table.schema):
        arr = table.column(field.name).combine_chunks()
        check(col["values"] == py_values(arr), f"{name}: values of {field.name}: {col['values']} != {py_values(arr)}")
        if field.nullable:
            want = [0 if v is None else 1 for v in arr.to_pylist()]
            check(col.get("valid") == want, f"{name}: valid of {field.name}: {col.get('valid')} != {want}")


# --- the scenario's table, several batches --------------------------------------------
D = 4
S = pa.schema([f("user_id", pa.int64()), f("session_len", pa.int32()),
               f("embedding", pa.list_(pa.float16(), D))])
DECL = [{"name": "user_id", "type": "I64"},
        {"name": "session_len", "type": "I32", "where": [[">=", 1]]},
        {"name": "embedding", "type": "F16", "list": D}]
rows = 10
emb = [((i * 7 + k) % 11 - 5) * 0.5 for i in range(rows) for k in range(D)]
T = pa.table([pa.array([2**40 + i for i in range(rows)], pa.int64()), pa.array(range(1, rows + 1), pa.int32()),
              fsl(emb, D)], schema=S)
GOOD = stream_bytes(S, T.to_batches(max_chunksize=3))
got = accepted("scenario", GOOD, DECL)
same_table("scenario", got, T)
if got:
    check(got["batches"] == 4, f"scenario: 4 batches, got {got['batches']}")
    check(got["columns"][2]["shape"] == [rows, D] and got["columns"][2]["dtype"] == "F16",
          f"scenario: embedding is F16 [{rows}, {D}]: {got['columns'][2]['shape']}")
    check(got["columns"][1]["shape"] == [rows] and got["columns"][1]["dtype"] == "I32", "scenario: session_len I32 [N]")

# exact F16 bit patterns, infinities and the largest half
special = [1.0, -2.5, 0.5, 65504.0, 0.0, float("inf"), float("-inf"), 3.0]
S2 = pa.schema([f("v", pa.list_(pa.float16(), 2))])
got = accepted("f16_special", stream_bytes(S2, [pa.record_batch([fsl(special, 2)], schema=S2)]),
               [{"name": "v", "type": "F16", "list": 2}])
if got:
    check(got["columns"][0]["values"] == [1.0, -2.5, 0.5, 65504.0, 0.0, "inf", "-inf", 3.0],
          f"f16_special: {got['columns'][0]['values']}")

# nulls in nullable columns: validity out, zeros in the null rows
SN = pa.schema([f("a", pa.int32(), True), f("v", pa.list_(pa.float32(), 2), True), f("d", pa.float64())])
TN = pa.table([pa.array([1, None, 3, -4], pa.int32()),
               fsl([1, 2, 9, 9, 5, 6, 7, 8], 2, mask=pa.array([False, True, False, False]), dtype=pa.float32()),
               pa.array([0.25, -1e300, 3.5, 1e-300], pa.float64())], schema=SN)
DN = [{"name": "a", "type": "I32", "nullable": True, "where": [[">", -10]]},
      {"name": "v", "type": "F32", "list": 2, "nullable": True}, {"name": "d", "type": "F64"}]
same_table("nulls", accepted("nulls", stream_bytes(SN, TN.to_batches(max_chunksize=2)), DN), TN)

# sliced arrays (offsets), a zero-row batch, and batches of one row
sliced = T.slice(3, 5)
batches = [sliced.to_batches()[0].slice(0, 2), T.to_batches()[0].slice(0, 0), sliced.to_batches()[0].slice(2, 3)]
same_table("sliced", accepted("sliced", stream_bytes(S, batches), DECL), sliced)
same_table("one_row_batches", accepted("one_row_batches", stream_bytes(S, T.to_batches(max_chunksize=1)), DECL), T)

# a schema and no batch: an empty table
got = accepted("empty_table", stream_bytes(S, []), DECL)
if got:
    check(got["rows"] == 0 and got["columns"][2]["shape"] == [0, D], f"empty_table: {got}")

# compression only when allowed
ZSTD = stream_bytes(S, T.to_batches(max_chunksize=4), compression="zstd")
refused("zstd", ZSTD, DECL, "message 1 at byte ", "the record batch body is compressed (ZSTD); compressed bodies are refused")
refused("lz4", stream_bytes(S, T.to_batches(), compression="lz4"), DECL, "compressed (LZ4_FRAME)")
same_table("zstd_allowed", accepted("zstd_allowed", ZSTD, DECL, "--allow-compressed"), T)

# --- values -----------------------------------------------------------------------------
n = 5000
sess = [1] * n
sess[4097] = 0
sess[4500] = -3
SV = pa.schema([f("session_len", pa.int32())])
TV = pa.table([pa.array(sess, pa.int32())], schema=SV)
refused("refinement", stream_bytes(SV, TV.to_batches(max_chunksize=1000)),
        [{"name": "session_len", "type": "I32", "where": [[">=", 1]]}], "session_len >= 1 fails at row 4097: value 0")
refused("refinement_named_bound", stream_bytes(S, T.to_batches(max_chunksize=3)),
        [DECL[0], {"name": "session_len", "type": "I32", "where": [["<=", 8, "S"]]}, DECL[2]],
        "session_len <= S fails at row 8: value 9")
refused("refinement_elements", GOOD, DECL[:2] + [{"name": "embedding", "type": "F16", "list": D, "where": [["<", 2]]}],
        "embedding < 2 fails at row 1, element 2: value 2")
SNN = pa.schema([f("a", pa.int32())])
refused("null_in_non_nullable",
        stream_bytes(SNN, [pa.RecordBatch.from_arrays([pa.array([1, 2, 3], pa.int32())], schema=SNN),
                           pa.RecordBatch.from_arrays([pa.array([4, None, 6], pa.int32())], schema=SNN)]),
        [{"name": "a", "type": "I32"}], "column `a` is declared non-nullable, but row 4 is null")
SE = pa.schema([f("v", pa.list_(pa.float16(), 2))])
refused("null_element", stream_bytes(SE, [pa.record_batch([fsl([1, 2, 3, None], 2)], schema=SE)]),
        [{"name": "v", "type": "F16", "list": 2}],
        "column `v`: row 1, element 1 is null (the elements of a FixedSizeList column cannot be null)")

# --- the schema against the declaration ------------------------------------------------
refused("missing_column", GOOD, DECL + [{"name": "label", "type": "I32"}],
        "the stream has no column `label` (declared column 3); its columns: user_id, session_len, embedding")
refused("reordered", GOOD, [DECL[1], DECL[0], DECL[2]],
        "column order differs: declared column 0 is `session_len`, the stream's columns are user_id, session_len, embedding")
refused("extra_column", GOOD, DECL[:2], "the stream has an undeclared column `embedding` (column 2)")
refused("wrong_type", GOOD, [{"name": "user_id", "type": "I32"}] + DECL[1:],
        "column `user_id`: declared I32, the stream has int64")
refused("wrong_list_size", GOOD, DECL[:2] + [{"name": "embedding", "type": "F16", "list": 8}],
        "column `embedding`: declared FixedSizeList[F16, 8], the stream has fixed_size_list<item: halffloat>[4]")
refused("wrong_list_type", GOOD, DECL[:2] + [{"name": "embedding", "type": "F32", "list": D}],
        "declared FixedSizeList[F32, 4], the stream has fixed_size_list<item: halffloat>[4]")
refused("nullable_mismatch", GOOD, [dict(DECL[0], nullable=True)] + DECL[1:],
        "column `user_id`: declared nullable, the stream's field is non-nullable")
refused("non_nullable_with_null", stream_bytes(SN, TN.to_batches()), [dict(DN[0], nullable=False)] + DN[1:],
        "column `a` is declared non-nullable, but row 1 is null")
SD = pa.schema([f("c", pa.dictionary(pa.int32(), pa.string()))])
DICT = stream_bytes(SD, [pa.record_batch([pa.array(["x", "y", "x"]).dictionary_encode().cast(SD.field("c").type)],
                                         schema=SD)])
refused("dictionary", DICT, [{"name": "c", "type": "I32"}],
        "column `c`: dictionary-encoded columns are refused (the stream has dictionary<values=string, indices=int32")
# Category[I32, K]: dictionary batches before the batches; int16 indices widened to I32 codes,
# K bound to the dictionary's size, the dictionary given back; compressed bodies refused
# unless allowed (the replayed path too); int64 indices, a delta and a constant size refused.
CAT_DECL = [{"name": "c", "type": "I32", "category": "K"}]
SC = pa.schema([f("c", pa.dictionary(pa.int16(), pa.string()))])
cat_codes = [2, 0, 1, 1, 0, 2, 2]
CT = pa.table([pa.DictionaryArray.from_arrays(pa.array(cat_codes, pa.int16()), pa.array(["p", "q", "r"]))], schema=SC)
CAT = stream_bytes(SC, CT.to_batches(max_chunksize=3))
got = accepted("category", CAT, CAT_DECL)
if got is not None:
    col = got["columns"][0]
    check((col["dtype"], col["values"], col["dictionary"], got["dims"].get("K"), got["batches"])
          == ("I32", cat_codes, ["p", "q", "r"], 3, 3), f"category: read back {col}, dims {got['dims']}")
CAT_ZSTD = stream_bytes(SC, CT.to_batches(max_chunksize=3), compression="zstd")
refused("category_zstd", CAT_ZSTD, CAT_DECL, "the record batch body is compressed (ZSTD); compressed bodies are refused")
got = accepted("category_zstd_allowed", CAT_ZSTD, CAT_DECL, "--allow-compressed")
check(got is None or got["columns"][0]["values"] == cat_codes, "category_zstd_allowed: the codes")
SC64 = pa.schema([f("c", pa.dictionary(pa.int64(), pa.string()))])
refused("category_int64", stream_bytes(SC64, [pa.record_batch([pa.array(["x"]).dictionary_encode().cast(
                                           SC64.field("c").type)], schema=SC64)]),
        CAT_DECL, "column `c`: declared Category[I32, K], the stream has dictionary<values=string, indices=int64")
delta = [pa.record_batch([pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int16()), pa.array(d))], schema=SC)
         for d in (["p", "q"], ["p", "q", "r"])]
refused("category_delta", stream_bytes(SC, delta, emit_dictionary_deltas=True), CAT_DECL,
        "column `c`: record batch 1 has another dictionary (3 values) than record batch 0 (2 values)")
refused("category_size", CAT, [dict(CAT_DECL[0], category=4)],
        "column `c`: declared Category[I32, 4], the stream's dictionary has 3 values")
refused("bad_declaration", GOOD, DECL + [dict(DECL[0])], "schema declaration: column `user_id` is declared twice")
refused("bad_declaration_dtype", GOOD, [{"name": "x", "type": "U8"}],
        "schema declaration: column `x` has type U8; columns are I32, I64, F16, BF16, F32, F64 or Bool")
refused("bad_declaration_size", GOOD, [{"name": "x", "type": "F16", "list": 0}],
        "schema declaration: column `x` has list size 0; it must be at least 1")

# --- tables as they come: nullable fields, Bool, BF16 ------------------------------------
# pa.table({..}) makes every field nullable: read for non-nullable columns while no row is
# null (one batch with a validity bitmap whose bits are all set, and batches without one),
# refused at the first null row, counted across batches.
TD = pa.table({"a": pa.array([3, 1, 4, 1, 5], pa.int32()), "v": fsl([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 2, dtype=pa.float32())})
check(all(fl.nullable for fl in TD.schema), "pa.table makes nullable fields")
DD = [{"name": "a", "type": "I32", "where": [[">=", 1]]}, {"name": "v", "type": "F32", "list": 2}]
for name, table in [("nullable_fields", TD),
                    ("nullable_fields_bitmap", pa.table({"a": pa.array([3, 1, None, 1, 5], pa.int32()).fill_null(4),
                                                         "v": TD.column("v")}))]:
    got = accepted(name, stream_bytes(table.schema, table.to_batches(max_chunksize=2)), DD)
    if got:
        check(got["columns"][0]["values"] == [3, 1, 4, 1, 5] and "valid" not in got["columns"][0],
              f"{name}: a is read as non-nullable: {got['columns'][0]}")
        check(got["columns"][1]["values"] == list(range(1, 11)), f"{name}: v {got['columns'][1]['values']}")
TDN = pa.table({"a": pa.array([3, 1, 4, None, 5], pa.int32()), "v": TD.column("v")})
refused("nullable_field_null", stream_bytes(TDN.schema, TDN.to_batches(max_chunksize=2)), DD,
        "column `a` is declared non-nullable, but row 3 is null")

# Bool: Arrow packs it in bits; sliced at offsets that are not byte-aligned, several batches,
# a FixedSizeList of Bool, and a nullable Bool column (nulls read as 0 with their validity).
flags = [i % 3 == 0 for i in range(23)]
bits = [(i * 5) % 7 < 3 for i in range(23 * 3)]
TB = pa.table([pa.array(flags), pa.FixedSizeListArray.from_arrays(pa.array(bits), 3),
               pa.array([None if i % 4 == 1 else i % 2 == 0 for i in range(23)])],
              schema=pa.schema([f("flag", pa.bool_()), f("bits", pa.list_(pa.bool_(), 3)), f("maybe", pa.bool_(), True)]))
TBS = TB.slice(3, 17)
DB = [{"name": "flag", "type": "Bool"}, {"name": "bits", "type": "Bool", "list": 3},
      {"name": "maybe", "type": "Bool", "nullable": True}]
got = accepted("bool", stream_bytes(TBS.schema, TBS.to_batches(max_chunksize=5)), DB)
same_table("bool", got, TBS)
if got:
    check(got["columns"][0]["dtype"] == "Bool" and got["columns"][1]["shape"] == [17, 3], f"bool: {got['columns'][1]}")
refused("bool_as_i32", stream_bytes(TB.schema, TB.to_batches()), [dict(DB[0], type="I32")] + DB[1:],
        "column `flag`: declared I32, the stream has bool")

# BF16: uint16 bits with field metadata ARROW:extension:name = mlk.bfloat16 (a column, and the
# element field of a FixedSizeList); a rule compares the bfloat16 values; a plain uint16 is refused.
EXT = {b"ARROW:extension:name": b"mlk.bfloat16"}
hbits = [0x3F80, 0xC020, 0x3E20, 0x7F80]  # 1.0, -2.5, 0.15625, inf
SH = pa.schema([pa.field("h", pa.uint16(), nullable=True, metadata=EXT),
                pa.field("e", pa.list_(pa.field("item", pa.uint16(), metadata=EXT), 2))])
TH = pa.table([pa.array(hbits, pa.uint16()),
               pa.FixedSizeListArray.from_arrays(pa.array(hbits + hbits[::-1], pa.uint16()), type=SH.field("e").type)],
              schema=SH)
DH = [{"name": "h", "type": "BF16"}, {"name": "e", "type": "BF16", "list": 2}]
got = accepted("bf16", stream_bytes(SH, TH.to_batches(max_chunksize=3)), DH)
if got:
    check(got["columns"][0]["dtype"] == "BF16" and got["columns"][0]["values"] == [1.0, -2.5, 0.15625, "inf"],
          f"bf16: h {got['columns'][0]}")
    check(got["columns"][1]["values"] == [1.0, -2.5, 0.15625, "inf", "inf", 0.15625, -2.5, 1.0],
          f"bf16: e {got['columns'][1]['values']}")
refused("bf16_rule", stream_bytes(SH, TH.to_batches()), [dict(DH[0], where=[[">", 0]]), DH[1]],
        "h > 0 fails at row 1: value -2.5")
SU = pa.schema([pa.field("h", pa.uint16())])
refused("bf16_plain_uint16", stream_bytes(SU, [pa.record_batch([pa.array(hbits, pa.uint16())], schema=SU)]), DH[:1],
        "column `h`: declared BF16, the stream has uint16 (a BF16 column is uint16 with field metadata "
        "ARROW:extension:name = mlk.bfloat16)")

# --- framing ---------------------------------------------------------------------------


def messages(data):
    """(offset, metadata size, body length) of each message, by the format's framing."""
    out, pos = [], 0
    while pos < len(data):
        marker, size = struct.unpack_from("<Ii", data, pos)
        if size == 0:
            break
        meta = data[pos + 8:pos + 8 + size]
        root = struct.unpack_from("<I", meta, 0)[0]
        vt = root - struct.unpack_from("<i", meta, root)[0]
        vt_size = struct.unpack_from("<H", meta, vt)[0]
        body_off = struct.unpack_from("<H", meta, vt + 4 + 2 * 3)[0] if 4 + 2 * 3 < vt_size else 0
        body = struct.unpack_from("<q", meta, root + body_off)[0] if body_off else 0
        out.append((pos, size, body, root + body_off if body_off else None))
        pos += 8 + size + body
    return out


MSG = messages(GOOD)
check(len(MSG) == 5, f"GOOD has a schema and 4 batches: {MSG}")
sch_end = 8 + MSG[0][1]
b1 = MSG[1][0]
refused("empty_file", b"", DECL, "empty stream: no Schema message")
refused("eos_only", b"\xff\xff\xff\xff\x00\x00\x00\x00", DECL, "empty stream: no Schema message")
refused("truncated_prefix", GOOD[:b1 + 2], DECL, "message 1 at byte %d: truncated: 2 bytes where a continuation marker belongs" % b1)
refused("truncated_size", GOOD[:b1 + 6], DECL, "message 1 at byte %d: truncated: the metadata size is cut off" % b1)
refused("truncated_metadata", GOOD[:b1 + 20], DECL,
        "message 1 at byte %d: truncated: metadata of %d bytes, 12 bytes remain" % (b1, MSG[1][1]))
cut = b1 + 8 + MSG[1][1] + 8
refused("truncated_body", GOOD[:cut], DECL,
        "message 1 at byte %d: truncated: a body of %d bytes, 8 bytes remain" % (b1, MSG[1][2]))
bad = bytearray(GOOD)
bad[b1:b1 + 4] = b"\x00\x00\x00\x00"
refused("bad_marker", bytes(bad), DECL, "message 1 at byte %d: bad continuation marker: expected FFFFFFFF, found 00000000" % b1)
refused("no_marker_at_start", GOOD[4:], DECL, "message 0 at byte 0: bad continuation marker: expected FFFFFFFF")
bad = bytearray(GOOD)
struct.pack_into("<i", bad, b1 + 4, MSG[1][1] + 4)
refused("metadata_size_not_8", bytes(bad), DECL, "metadata size %d is not a positive multiple of 8" % (MSG[1][1] + 4))
struct.pack_into("<i", bad, b1 + 4, -8)
refused("metadata_size_negative", bytes(bad), DECL, "metadata size -8 is not a positive multiple of 8")
# the RecordBatch's bodyLength far past the end
bad = bytearray(GOOD)
struct.pack_into("<q", bad, b1 + 8 + MSG[1][3], 1 << 40)
refused("overlong_body_length", bytes(bad), DECL, "message 1 at byte %d: truncated: a body of %d bytes" % (b1, 1 << 40))
# a buffer of the RecordBatch longer than its body: the Buffer vector of the
# first batch is (offset, length) pairs, user_id's validity (none) and values
# (3 rows * 8 bytes), session_len's validity (none), then session_len's values
meta1 = GOOD[b1 + 8:b1 + 8 + MSG[1][1]]
head = struct.pack("<qqqqqq", 0, 0, 0, 24, 24, 0)
check(meta1.count(head) == 1, "found the Buffer vector of the first batch")
if meta1.count(head) == 1:
    bad = bytearray(GOOD)
    struct.pack_into("<q", bad, b1 + 8 + meta1.index(head) + len(head) + 8, 4096)
    refused("overlong_buffer_length", bytes(bad), DECL, "message 1 at byte %d: invalid record batch: " % b1)
# a flipped flatbuffer byte: the root table offset of the schema points past the metadata
bad = bytearray(GOOD)
bad[8] ^= 0xFF
refused("flipped_root_offset", bytes(bad), DECL, "message 0 at byte 0: invalid message metadata: ")
# the field name in the schema's flatbuffer, one byte flipped: a schema mismatch
bad = bytearray(GOOD)
at = GOOD.index(b"session_len", 0, sch_end)
bad[at] ^= 0x01
refused("flipped_name", bytes(bad), DECL, "the stream has no column `session_len`")
refused("trailing_bytes", GOOD + b"\x00" * 8, DECL, "8 bytes follow the end-of-stream marker at byte %d" % (len(GOOD) - 8))
refused("second_schema", GOOD[:-8] + GOOD[:sch_end], DECL, "message 5 at byte %d: a second Schema message" % (len(GOOD) - 8))
refused("batch_first", GOOD[b1:], DECL, "message 0 at byte 0: the stream must begin with a Schema message, found RecordBatch")
refused("metadata_v4", stream_bytes(S, T.to_batches(), metadata_version=pa.ipc.MetadataVersion.V4), DECL,
        "message 0 at byte 0: metadata version V4 is not supported (V5 is)")

# --- never a crash: random damage --------------------------------------------------------
rng = random.Random(15)
crashes = 0
path = os.path.join(TMP, "damaged.arrows")
for i in range(300):
    bad = bytearray(GOOD)
    kind = i % 3
    if kind == 0:
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        bad = bad[:rng.randrange(len(bad))]
    else:
        p = rng.randrange(len(bad) - 8)
        struct.pack_into("<q", bad, p - p % 8, rng.choice([-1, 1 << 62, 7, 1 << 31, 4097]))
    with open(path, "wb") as fh:
        fh.write(bad)
    rc, out, err = run(path, DECL)
    if rc not in (0, 1) or (rc == 1 and not err.startswith(path + ": ")):
        crashes += 1
        if crashes <= 3:
            print(f"damage {i}: rc {rc}, stderr {err[-300:]!r}")
check(crashes == 0, f"{crashes} of 300 damaged streams crashed or failed without a named error")

print(f"{len(failures)} failed" if failures else "arrow_stream: all cases passed")
sys.exit(1 if failures else 0)
