"""mlk models: a .tl program, its binding (derived from the program, or a
file) and its weights, served through the runtime (runtime/model.h).
docs/tutorial-serve-a-model.md walks through one.

    import mlk
    model = mlk.load_model("examples/minilm/minilm.tl", weights="model.safetensors", target="host",
                           entry="encode")
    emb = model(input_ids, attention_mask)     # torch tensors in, a torch tensor out

The weights are mapped once and checked against the program at load (a
missing, extra, mistyped or misshapen tensor raises mlk.BoundaryError naming
its key and the field); each call runs the binding's steps on the
runtime's kernels with the weights in place.
"""
from . import _dlpack, _mlk
from . import checked as _checked

__all__ = ["load_model", "Model", "pack_tokens", "PACKED_INPUTS"]

# The inputs of a binding in the packed-token form (examples/minilm/minilm.tl, "The packed-token form").
PACKED_INPUTS = ("input_ids", "position_ids", "pad_index", "pad_mask", "unpad_index")


def _precision_option(precision):
    """The target-policy option for a products' precision policy: "" for f32, else ";precision=P"."""
    if precision not in ("f32", "bf16", "f16"):
        raise ValueError("precision=%r: expected 'f32', 'bf16' or 'f16'" % (precision,))
    return "" if precision == "f32" else ";precision=" + precision


def _policy(target, require, trusted):
    """The runtime's policy string of mlk.load and mlk.load_model's arguments:
    `target`, then `;require=REQUIRE` and `;require=signed:KEYS`; ValueError
    naming a bad argument."""
    if require not in ("any", "tuned", "exact") and not str(require).startswith("verified:"):
        raise ValueError("require=%r: expected 'any', 'tuned', 'exact' or 'verified:LEVELS'" % (require,))
    if isinstance(trusted, str):
        trusted = [trusted]
    trusted = [str(k) for k in (trusted or [])]
    for k in trusted:
        if not k or "," in k or ";" in k:
            raise ValueError("trusted=%r: each item is one public key (64 hex) or one KEY.pub path" % (k,))
    policy = target if require == "any" else "%s;require=%s" % (target, require)
    if trusted:
        policy += ";require=signed:" + ",".join(trusted)
    return policy


def pack_tokens(token_lists):
    """The packed-token form of N sentences (one sequence of token ids each), as int64 numpy arrays:
    input_ids [1, S] (every sentence's tokens back to back, S their total), position_ids [1, S] (each
    token's position in its sentence), pad_index [N, W] (the token at slot w of sentence n, W the
    longest sentence; past a sentence's end its last token), pad_mask [N, W] (1 where slot w holds a
    token of sentence n) and unpad_index [1, S] (each token's slot, n * W + w). Each sentence is its
    own tokens only, not a row of a padded batch. An empty list, and a sentence that is empty, not
    one-dimensional, not of integers or with a negative id, raise mlk.BoundaryError naming it.
    Attention costs N * W * W per head: a batch of one long sentence and many short ones is better
    split by length."""
    import numpy as np
    rows = []
    for i, t in enumerate(token_lists):
        r = np.asarray(t)
        if r.ndim != 1:
            raise _mlk.BoundaryError("sentence %d of the token lists is %s, not a sequence of token ids (pass one "
                                     "list of ids per sentence, unpadded)" % (i, "a scalar" if r.ndim == 0
                                                                             else "of rank %d" % r.ndim))
        if r.size and r.dtype.kind not in "iu":
            raise _mlk.BoundaryError("sentence %d of the token lists holds %s values; token ids are integers"
                                     % (i, r.dtype))
        if r.size and r.min() < 0:
            raise _mlk.BoundaryError("sentence %d of the token lists has a negative token id (%d)" % (i, int(r.min())))
        rows.append(r.astype(np.int64))
    if not rows:
        raise _mlk.BoundaryError("the packed-token form needs at least one sentence")
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    if (lengths == 0).any():
        raise _mlk.BoundaryError("sentence %d of the token lists has no token" % int(np.argmin(lengths)))
    w = int(lengths.max())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    slot = np.arange(w)[None, :]
    return {
        "input_ids": np.concatenate(rows)[None, :],
        "position_ids": np.concatenate([np.arange(k, dtype=np.int64) for k in lengths])[None, :],
        "pad_index": starts[:, None] + np.minimum(slot, lengths[:, None] - 1),
        "pad_mask": (slot < lengths[:, None]).astype(np.int64),
        "unpad_index": np.concatenate([i * w + np.arange(k, dtype=np.int64) for i, k in enumerate(lengths)])[None, :],
    }


def _torch_module(args):
    for a in args:
        t = type(a)
        if t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter"):
            import torch
            return torch
    return None


class Model:
    """A model: call it with its inputs, by position or by name (model.input_names)."""

    def __init__(self, native):
        self._native = native
        self.input_names = [name for name, _ in native.inputs]
        self._required = dict(native.inputs)
        self._result_dtype = native.result_dtype
        self._allocs = {}  # output kind -> alloc(shape), made on first use

    @property
    def mapped_bytes(self):
        """Bytes of tensor data in the weights file, mapped (not copied) at load."""
        return self._native.mapped_bytes

    @property
    def copied_bytes(self):
        """Bytes copied at load: tensors the file does not align to their element size."""
        return self._native.copied_bytes

    def _inputs(self, args, kwargs):
        if len(args) > len(self.input_names):
            raise _mlk.BoundaryError("the model takes %d inputs (%s), got %d"
                                     % (len(self.input_names), ", ".join(self.input_names), len(args)))
        given = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k not in self._required:
                raise _mlk.BoundaryError("the model has no input `%s` (its inputs: %s)" % (k, ", ".join(self.input_names)))
            if k in given:
                raise _mlk.BoundaryError("input `%s` is given twice" % k)
            given[k] = v
        values = [given.get(n) for n in self.input_names]
        for i, (n, v) in enumerate(zip(self.input_names, list(values))):
            if v is None and self._required[n]:
                raise _mlk.BoundaryError("input `%s` of the model is required" % n)
            if v is not None and getattr(v.tensor if isinstance(v, _checked.Checked) else v, "requires_grad", False):
                if isinstance(v, _checked.Checked) or _torch_grad_enabled():
                    raise _mlk.BoundaryError("input `%s` requires grad; mlk kernels have no autograd (pass %s.detach(), "
                                             "or call under torch.no_grad())" % (n, n))
                values[i] = v.detach()  # grad mode off: no gradient is lost
            if v is not None and not hasattr(v, "__dlpack__"):
                raise _mlk.BoundaryError("input `%s`: a %s, not a tensor (torch.Tensor or an object with __dlpack__)"
                                         % (n, type(v).__name__))
        return values

    def _alloc(self, values, torch):
        kind = "torch" if torch is not None else _dlpack.output_kind(values)
        alloc = self._allocs.get(kind)
        if alloc is None:
            alloc = self._allocs[kind] = _dlpack.allocator(kind, self._result_dtype, torch)
        return alloc

    def __call__(self, *args, **kwargs):
        values, proven = self._unwrap(self._inputs(args, kwargs))
        torch = _torch_module(values)
        return _mlk.model_call(self._native, self._capsules(values, torch), self._alloc(values, torch), proven)

    @staticmethod
    def _unwrap(values):
        """(`values` with each checked handle replaced by its tensor, what the handles proved):
        a step given a handle's input skips the refinements it proved (mlk/checked.py)."""
        values, _, proven = _checked.unwrap(values, None, ())
        return list(values), proven

    def encode(self, token_lists):
        """Embeds sentences of different lengths without padding them: `token_lists` holds one
        sequence of token ids per sentence (each as a tokenizer gives it, [CLS] ... [SEP]). Their
        tokens go back to back into one row (the packed-token form, pack_tokens), so the products
        and norms spend no FLOP on padding and attention only crosses tokens of one sentence. Needs
        a model whose inputs are the packed form's (examples/minilm/minilm.tl's entry `encode_packed`);
        returns one row per sentence, as a numpy array."""
        missing = [n for n in PACKED_INPUTS if n not in self._required]
        if missing:
            raise _mlk.BoundaryError("encode needs a model of the packed-token form; this model's inputs (%s) lack %s"
                                     % (", ".join(self.input_names), ", ".join(missing)))
        return self(**pack_tokens(token_lists))

    def _where(self, i):
        return "input `%s` of the model" % self.input_names[i]

    def _capsules(self, values, torch):
        caps = []
        for i, v in enumerate(values):
            if v is not None and torch is not None and isinstance(v, torch.Tensor) and v.dtype is torch.bool:
                v = v.view(torch.uint8)  # DLPack's Bool as mlk takes it (as torch 1.13 exports it)
            caps.append(None if v is None else _dlpack.capsule(v, self._where, i))
        return caps

    def selections(self, *args, **kwargs):
        """Which kernel runs each step for these inputs (tuned, or the default schedule), one line per step,
        each followed by the refinements an input's checked handle proved (mlk.check), not checked again."""
        values, proven = self._unwrap(self._inputs(args, kwargs))
        return self._native.selections(self._capsules(values, _torch_module(values)), proven)


def _torch_grad_enabled():
    import torch
    return torch.is_grad_enabled()


def load_model(program, weights, binding=None, target="host", cache="", namespace="default", token="", require="any",
               namespaces="", precision="f32", entry=None, rename=None, trusted=None):
    """The model of the .tl file `program` with the weights in the safetensors
    file `weights`. Its steps and the key of each weight come from `binding`
    (a binding file) when given; else from the program itself when `entry`
    or `rename` is given or no `<program>.binding.json` exists: the entry fn
    (`entry`, default: the only fn that takes a record and that no fn calls) calls the
    step fns, and each field of its record parameters binds the tensor named
    by the field's path (`encoder.layer.0.attention.self.query.weight`), after
    `rename` ({path prefix: key prefix}) (docs/tutorial-serve-a-model.md).
    `target`, `cache`, `namespace`, `token`, `namespaces` and `require` choose
    the kernels as in mlk.load: the tuned artifact of each step for the call's
    shape from the cache, else the default schedule (JIT). `precision` ("f32",
    "bf16", "f16") is the products' policy, and `trusted` (public keys or
    KEY.pub paths) admits only artifacts one of them signed, with no JIT
    fallback, as in mlk.load (docs/signing.md)."""
    option = _precision_option(precision)
    policy = _policy(target, require, trusted) + option
    if rename is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in dict(rename).items()):
        raise TypeError("rename maps a record path prefix (str) to a weights key prefix (str)")
    rt = _mlk.Runtime(cache, namespace, token, namespaces)
    return Model(rt.model(str(program), "" if binding is None else str(binding), str(weights), policy,
                          "" if entry is None else str(entry), dict(rename or {})))
