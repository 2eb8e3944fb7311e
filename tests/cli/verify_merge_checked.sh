#!/usr/bin/env bash
# verify_merge_checked.sh MLK EXAMPLES WORK: issue 49, the sixth review. In
# staged verification `mlk verify --sign` keeps the levels of an earlier
# report that this key signed, but it checked only the entry metadata's
# copy; the copy in the entry's manifest.json was merged as it was and
# signed. A writer who re-PUT the entry with passing levels of its own in
# manifest.json (the statement leaves the report out, so nothing else
# changes) got them signed by the verifier's key at the next stage. Both
# copies now start from the one report that was checked.
set -u
mlk=$1; examples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
fail() { echo "FAIL: $*"; [ -n "${sp:-}" ] && kill "$sp"; exit 1; }
shape=(--fn rmsnorm --dims B=2,S=4,D=64 --target host)
"$mlk" key create verifier.pem >/dev/null || fail "key create"
token=$("$mlk" token create --team alpha --scopes read,write-blobs,write-entries --cache serve.db 2>/dev/null | tail -1)
"$mlk" serve --cache serve.db --listen 127.0.0.1:0 --threads 2 > serve.out 2>&1 &
sp=$!
for _ in $(seq 50); do grep -q listening serve.out && break; sleep 0.1; done
port=$(head -1 serve.out | grep -o '127.0.0.1:[0-9]*' | cut -d: -f2)
[ -n "$port" ] || fail "serve did not start: $(cat serve.out)"
url="http://127.0.0.1:$port"
export MLK_TOKEN=$token
out=$(MLK_LOCAL_CACHE=m1.db "$mlk" tune "$examples/norms.tl" "${shape[@]}" --trials 1 --time 20 --cache "$url" -q 2>&1) \
  || fail "tune: $out"
# Stage 1: the verifier checks the cheap levels and signs them.
out=$(MLK_LOCAL_CACHE=m2.db "$mlk" verify "$examples/norms.tl" "${shape[@]}" --level types --cache "$url" \
      --sign verifier.pem 2>&1) || fail "verify stage 1: $out"
# The writer: manifest.json's copy of the report gains passing levels never run.
python3 - "$url" "$token" <<'PY' || fail "the writer's re-PUT"
import hashlib, json, sys, urllib.request
url, token = sys.argv[1], sys.argv[2]
def call(method, path, body=None):
    req = urllib.request.Request(url + path, data=body, method=method, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req) as r:
        return r.read()
key = json.loads(call("GET", "/v1/entries?fn=rmsnorm"))["entries"][0]["key"]
entry = json.loads(call("GET", "/v1/entries/" + key))["manifest"]
ref = entry["files"]["manifest.json"]
man = json.loads(call("GET", "/v1/blobs/" + ref["digest"]))
for level in ("envelope", "memory", "equivalence"):
    man["verify_report"]["levels"].append({"level": level, "pass": True, "checked": "the writer's word"})
data = json.dumps(man, indent=2).encode()
digest = hashlib.sha256(data).hexdigest()
call("PUT", "/v1/blobs/" + digest, data)
entry["files"]["manifest.json"] = {"digest": digest, "size": len(data)}
call("PUT", "/v1/entries/" + key, json.dumps(entry).encode())
PY
# Stage 2 on a fresh mirror: the verifier checks identity and signs.
out=$(MLK_LOCAL_CACHE=m3.db "$mlk" verify "$examples/norms.tl" "${shape[@]}" --level identity --cache "$url" \
      --sign verifier.pem 2>&1) || fail "verify stage 2: $out"
python3 - "$url" "$token" <<'PY' || fail "the verifier signed levels it never ran"
import json, sys, urllib.request
url, token = sys.argv[1], sys.argv[2]
def call(path):
    req = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req) as r:
        return r.read()
key = json.loads(call("/v1/entries?fn=rmsnorm"))["entries"][0]["key"]
entry = json.loads(call("/v1/entries/" + key))["manifest"]
man = json.loads(call("/v1/blobs/" + entry["files"]["manifest.json"]["digest"]))
meta = entry["meta"] if isinstance(entry["meta"], dict) else json.loads(entry["meta"])
for where, rep in (("manifest.json", man["verify_report"]), ("metadata", meta["verify_report"])):
    levels = sorted(l["level"] for l in rep["levels"])
    print(where, levels, "signed" if "signature" in rep else "unsigned")
    if levels != ["identity", "types"]:
        sys.exit(1)
PY
kill "$sp"; wait "$sp" 2>/dev/null
echo "ok: verify_merge_checked"
