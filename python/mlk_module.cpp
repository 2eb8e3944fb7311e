// mlk._mlk: the Python binding of the runtime (runtime/runtime.h), on DLPack
// capsules. python/mlk/__init__.py turns torch tensors (or numpy arrays, or
// any DLPack producer) into capsules and allocates outputs; every check
// happens here, in C++, with the same messages as the C++ runtime.
//
// Capsules are consumed (docs/interop/pytorch.md, "DLPack"): a "dltensor" or
// "dltensor_versioned" capsule is renamed "used_dltensor" /
// "used_dltensor_versioned", so that its destructor leaves it alone, and its
// tensor's deleter runs exactly once, when the call that consumed it returns
// (runtime/dlpack.h), with the GIL held. Results the runtime allocates
// (mlk.Tensor) export themselves through DLPack, zero-copy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lang/c_declarations.h"
#include "lang/ir_printer.h"
#include "python/fast_call.h"
#include "runtime/boundary.h"
#include "runtime/call_plan.h"
#include "runtime/checked.h"
#include "runtime/dlpack.h"
#include "runtime/model.h"
#include "runtime/runtime.h"
#include "runtime/select.h"
#include "runtime/testing.h"

namespace py = pybind11;
using mlk::Status;

namespace {

struct BoundaryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NotFoundError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct CorruptionError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void raise(const Status& s) {
  switch (s.code()) {
    case Status::Code::kInvalidArgument:
    case Status::Code::kUsage: throw BoundaryError(s.message());
    case Status::Code::kNotFound: throw NotFoundError(s.message());
    case Status::Code::kCorruption: throw CorruptionError(s.message());
    default: throw Error(s.message());
  }
}

template <typename T>
T unwrap(mlk::Expected<T> e) {
  if (!e.ok()) raise(e.status());
  return std::move(e).value();
}

// The Python type name of `o`, for messages.
std::string type_name(const py::handle& o) { return py::str(py::type::handle_of(o).attr("__name__")); }

// Consumes the DLPack capsule `cap` (see the top of this file); `what` names
// it in errors. A refused capsule of a DLPack name is consumed too, so its
// deleter still runs once.
mlk::rt::ConsumedTensor consume(const py::handle& cap, const std::string& what) {
  PyObject* o = cap.ptr();
  if (!PyCapsule_CheckExact(o)) throw BoundaryError(what + ": a " + type_name(cap) + ", not a DLPack capsule");
  const char* raw = PyCapsule_GetName(o);
  const std::string name = raw ? raw : "";
  if (name == "dltensor_versioned" || name == "dltensor") {
    void* p = PyCapsule_GetPointer(o, raw);
    if (!p) throw py::error_already_set();
    if (PyCapsule_SetName(o, name == "dltensor" ? "used_dltensor" : "used_dltensor_versioned") != 0)
      throw py::error_already_set();
    if (name == "dltensor") return unwrap(mlk::rt::ConsumedTensor::Adopt(static_cast<DLManagedTensor*>(p), what));
    return unwrap(mlk::rt::ConsumedTensor::Adopt(static_cast<DLManagedTensorVersioned*>(p), what));
  }
  if (name == "used_dltensor" || name == "used_dltensor_versioned")
    throw BoundaryError(what + ": the DLPack capsule was already consumed (it is named \"" + name +
                        "\"); a capsule is taken once: call __dlpack__() again for a new one");
  throw BoundaryError(what + ": a capsule named \"" + name +
                      "\", not a DLPack tensor (\"dltensor\" or \"dltensor_versioned\")");
}

// The consumed tensors of one call and their DLTensors; destroyed (the
// deleters run) with the GIL held, when the call returns or throws.
struct Consumed {
  std::vector<mlk::rt::ConsumedTensor> owned;
  std::vector<const DLTensor*> tensors;
  void add(mlk::rt::ConsumedTensor t) {
    tensors.push_back(t.tensor());
    owned.push_back(std::move(t));
  }
};

std::string argument_name(const mlk::ir::Function* f, size_t i) {
  if (!f || i >= f->params.size()) return "argument " + std::to_string(i);
  return "argument " + std::to_string(i) + " `" + f->params[i].name + "` of `" + f->name + "`";
}

Consumed consume_all(const py::list& caps, const mlk::ir::Function* f) {
  Consumed c;
  for (size_t i = 0; i < caps.size(); ++i) c.add(consume(caps[i], argument_name(f, i)));
  return c;
}

// What the handles of a call proved (python/mlk/checked.py, unwrap): one
// (argument index, proof) per handle, the proof the opaque CheckProof that
// check_type made (Python cannot make or change one, so a handle's edited
// .dims or a hand-made Checked proves nothing; a non-proof is a TypeError).
std::vector<mlk::rt::Proven> proven_of(const py::list& items) {
  std::vector<mlk::rt::Proven> out;
  for (const auto& item : items) {
    auto t = item.cast<py::tuple>();
    if (t.size() != 2 || !py::isinstance<mlk::rt::CheckedType>(t[1]))
      throw BoundaryError("a checked handle whose proof is not mlk.check's: make handles with mlk.check");
    const auto& proof = t[1].cast<const mlk::rt::CheckedType&>();
    mlk::rt::Proven p;
    p.arg = t[0].cast<size_t>();
    p.refinements = proof.refinements;
    p.dims = proof.dims;
    p.shape = proof.shape;
    p.dtype = proof.dtype;
    out.push_back(std::move(p));
  }
  return out;
}

// The output capsule, consumed and checked writable.
mlk::rt::ConsumedTensor consume_output(const py::handle& cap, const std::string& what) {
  auto t = consume(cap, what);
  Status s = t.CheckWritable(what);
  if (!s.ok()) raise(s);
  return t;
}

// mlk.Tensor: a result the runtime allocated, exported through DLPack.
struct PyTensor {
  std::shared_ptr<mlk::rt::HostBuffer> buf;
};

const char* const kLegacyName = "dltensor";
const char* const kVersionedName = "dltensor_versioned";

// Capsule destructors as the protocol has them: the deleter runs only when
// no consumer took the capsule (it still has its original name).
void legacy_capsule_destructor(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, kLegacyName)) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName));
  if (m && m->deleter) m->deleter(m);
}

void versioned_capsule_destructor(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, kVersionedName)) return;
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName));
  if (m && m->deleter) m->deleter(m);
}

[[noreturn]] void buffer_error(const std::string& m) {
  PyErr_SetString(PyExc_BufferError, m.c_str());
  throw py::error_already_set();
}

// Tensor.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None):
// a versioned capsule when the consumer reads DLPack 1.x (max_version >=
// (1, 0)), else the legacy one (torch 1.13, numpy 1.x).
py::object export_capsule(const PyTensor& t, const py::object& stream, const py::object& max_version,
                          const py::object& dl_device, const py::object& copy) {
  if (!stream.is_none()) buffer_error("mlk.Tensor lives in CPU memory: __dlpack__ takes no stream (stream=None)");
  if (!dl_device.is_none()) {
    auto d = dl_device.cast<std::pair<int, int>>();
    if (d.first != kDLCPU || d.second != 0)
      buffer_error("mlk.Tensor lives in CPU memory (device (1, 0)); it cannot be exported to device (" +
                   std::to_string(d.first) + ", " + std::to_string(d.second) + ")");
  }
  bool versioned = false;
  if (!max_version.is_none()) versioned = max_version.cast<std::pair<int, int>>().first >= 1;
  std::shared_ptr<mlk::rt::HostBuffer> buf = t.buf;
  const bool copied = !copy.is_none() && copy.cast<bool>();
  if (copied) {
    buf = unwrap(mlk::rt::HostBuffer::Allocate(t.buf->dtype(), t.buf->shape()));
    if (t.buf->nbytes()) std::memcpy(buf->data(), t.buf->data(), t.buf->nbytes());
  }
  if (!versioned) {
    DLManagedTensor* m = mlk::rt::export_legacy(buf);
    PyObject* cap = PyCapsule_New(m, kLegacyName, legacy_capsule_destructor);
    if (!cap) {
      m->deleter(m);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(cap);
  }
  DLManagedTensorVersioned* m = mlk::rt::export_versioned(buf);
  if (copied) m->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  PyObject* cap = PyCapsule_New(m, kVersionedName, versioned_capsule_destructor);
  if (!cap) {
    m->deleter(m);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

mlk::DType dtype_of(const std::string& name) {
  auto d = mlk::parse_dtype(name);
  if (!d) throw BoundaryError("unknown dtype `" + name + "` (F16, BF16, F32, F64, I8, I16, I32, I64, U8, Bool)");
  return *d;
}

py::dict envelope_dict(const mlk::rt::Envelope& e) {
  py::dict d;
  d["dtype"] = mlk::dtype_name(e.dtype);
  d["k"] = e.reduction_length;
  d["through_erf"] = e.through_erf;
  d["rtol"] = e.rtol;
  d["atol"] = e.atol;
  return d;
}

struct PyProgram {
  std::shared_ptr<mlk::rt::Runtime> rt;
  std::shared_ptr<const mlk::rt::Program> prog;
  // Policies by their text, parsed once (the call path is hot).
  std::shared_ptr<std::map<std::string, mlk::rt::TargetPolicy>> policies =
      std::make_shared<std::map<std::string, mlk::rt::TargetPolicy>>();
  const mlk::rt::TargetPolicy& policy(const std::string& text) const {
    auto it = policies->find(text);
    if (it == policies->end()) it = policies->emplace(text, unwrap(mlk::rt::TargetPolicy::Parse(text))).first;
    return it->second;
  }
};

struct PyKernel {
  std::shared_ptr<const mlk::rt::Kernel> k;
  std::vector<std::string> skipped;  // the refinements the call's handles proved (CheckedCall::skipped)
};

// mlk.select(...) (runtime/select.h): the selector and a kernel it picked.
struct PySelector {
  std::shared_ptr<mlk::rt::Selector> s;
  const mlk::ir::Function& fn(const std::string& name) const {
    const auto* f = s->signature(name);
    if (!f) throw NotFoundError("no candidate of select(...) has a fn `" + name + "`");
    return *f;
  }
};
struct PyPicked {
  mlk::rt::Selector::Picked p;
  std::vector<std::string> skipped;  // as PyKernel's
};

// A choice as Python data: {"fn", "text", "chosen": index or None, "considered": [..]}.
py::dict choice_dict(const mlk::rt::Choice& c) {
  py::list considered;
  for (const auto& k : c.considered)
    considered.append(py::dict(py::arg("index") = k.index, py::arg("rank") = mlk::rt::rank_name(k.rank),
                               py::arg("name") = k.name, py::arg("chosen") = k.chosen, py::arg("reason") = k.reason));
  py::dict d;
  d["fn"] = c.fn;
  d["text"] = c.explain();
  d["chosen"] = c.found() ? py::object(py::int_(c.chosen()->index)) : py::object(py::none());
  d["considered"] = considered;
  return d;
}

// A model (runtime/model.h); the Runtime it runs on lives as long as it.
struct PyModel {
  std::shared_ptr<mlk::rt::Runtime> rt;
  std::shared_ptr<const mlk::rt::Model> model;
};

// The model's inputs from a list of capsules, None (nullptr) for an input left out.
Consumed model_inputs(const py::list& caps, const mlk::rt::Model& m) {
  Consumed c;
  for (size_t i = 0; i < caps.size(); ++i) {
    if (caps[i].is_none()) {
      c.tensors.push_back(nullptr);
      continue;
    }
    auto t = consume(caps[i], "input " + std::to_string(i) + (i < m.inputs().size() ? " `" + m.inputs()[i].name + "`" : ""));
    c.tensors.push_back(t.tensor());
    c.owned.push_back(std::move(t));
  }
  return c;
}

py::dict signature(const mlk::ir::Function& f) {
  py::list params;
  for (const auto& p : f.params) {
    py::dict d;
    d["name"] = p.name;
    d["dtype"] = mlk::dtype_name(p.type.dtype);
    d["rank"] = p.type.shape.size();
    d["type"] = p.type.str();  // "Tensor[F32, [B, S, D]]"
    params.append(d);
  }
  py::list frames;  // Dataframe parameters: their column parameters (python/mlk/arrow.py)
  for (const auto& fr : f.frames) {
    py::list cols;
    for (const auto& c : fr.columns)
      if (c.param >= 0) cols.append(c.param);
    frames.append(py::dict(py::arg("name") = fr.name, py::arg("params") = cols, py::arg("type") = fr.str()));
  }
  py::list records;  // record parameters: their leaves' parameters (python/mlk/records.py)
  for (const auto& r : f.records)
    records.append(py::dict(py::arg("name") = r.name, py::arg("type") = r.type, py::arg("first") = r.first,
                            py::arg("count") = r.count));
  py::dict s;
  s["name"] = f.name;
  s["params"] = params;
  s["frames"] = frames;
  s["records"] = records;
  s["result_dtype"] = mlk::dtype_name(f.result_type.dtype);
  s["result_rank"] = f.result_type.shape.size();
  py::list results;  // every result (one, but for a fn with several)
  for (const auto& r : f.results())
    results.append(py::dict(py::arg("dtype") = mlk::dtype_name(r.type.dtype), py::arg("rank") = r.type.shape.size()));
  s["results"] = results;
  s["unbound_dims"] = f.unbound_dims();
  s["dim_vars"] = f.dim_vars;
  s["text"] = mlk::ir::print_signature(f);  // symbolic shapes and refinements, one line
  return s;
}

// A fn with several results, one run: checks the call, allocates each output
// through its Python callback in `allocs`, runs the kernel `get` gives for
// the call's dims without the GIL, and returns the tuple of results.
template <typename GetKernel>
py::tuple run_all(const mlk::ir::Function& f, const py::list& caps, const std::map<std::string, int64_t>& given,
                  const py::list& allocs, const py::list& proven, GetKernel get) {
  Consumed args = consume_all(caps, &f);
  mlk::rt::Placement any;
  any.any_device = true;
  mlk::rt::RunOptions ro;
  ro.proven = proven_of(proven);
  auto checked = unwrap(mlk::rt::check_call_all(f, args.tensors, {}, given, any, ro.proven));
  if (allocs.size() != checked.out_shapes.size())
    throw BoundaryError("`" + f.name + "` has " + std::to_string(checked.out_shapes.size()) + " results, got " +
                        std::to_string(allocs.size()) + " outputs");
  std::shared_ptr<const mlk::rt::Kernel> k = get(checked.dims);
  py::tuple results(checked.out_shapes.size());
  std::vector<mlk::rt::ConsumedTensor> outs;
  std::vector<DLTensor*> out_ptrs;
  for (size_t i = 0; i < checked.out_shapes.size(); ++i) {
    py::tuple made = allocs[i](py::cast(checked.out_shapes[i]));
    results[i] = made[0];
    outs.push_back(consume_output(made[1], "output " + std::to_string(i) + " of `" + f.name + "`"));
  }
  for (auto& o : outs) out_ptrs.push_back(const_cast<DLTensor*>(o.tensor()));
  Status s;
  {
    py::gil_scoped_release release;
    s = k->RunAll(args.tensors, out_ptrs, ro);
  }
  if (!s.ok()) raise(s);
  return results;
}

// The exception types (mlk.Error and its kinds), mlk.Tensor (a result the
// runtime allocated) and the module-level helpers on tensors and buffers:
// empty, check_type, live_host_buffers, live_exports, tolerance.
void bind_errors_and_buffers(py::module_& m) {
  auto base = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<BoundaryError>(m, "BoundaryError", PyExc_ValueError);
  py::register_exception<NotFoundError>(m, "NotFoundError", PyExc_LookupError);
  py::register_exception<CorruptionError>(m, "CorruptionError", base.ptr());

  // mlk.Tensor: a result the runtime allocated (mlk.empty, or a call whose
  // arguments are neither torch tensors nor numpy arrays), given to any
  // DLPack consumer zero-copy: torch.from_dlpack(t), np.from_dlpack(t).
  py::class_<PyTensor>(m, "Tensor")
      .def_property_readonly("shape", [](const PyTensor& t) { return py::tuple(py::cast(t.buf->shape())); })
      .def_property_readonly("dtype", [](const PyTensor& t) { return std::string(mlk::dtype_name(t.buf->dtype())); })
      .def_property_readonly("nbytes", [](const PyTensor& t) { return t.buf->nbytes(); })
      .def("data_ptr", [](const PyTensor& t) { return reinterpret_cast<uintptr_t>(t.buf->data()); })
      .def("__dlpack__", &export_capsule, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const PyTensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); })
      .def("__repr__", [](const PyTensor& t) {
        std::string s = "mlk.Tensor(shape=[";
        for (size_t i = 0; i < t.buf->shape().size(); ++i) s += (i ? ", " : "") + std::to_string(t.buf->shape()[i]);
        return s + "], dtype=" + mlk::dtype_name(t.buf->dtype()) + ")";
      });
  m.attr("__version__") = MLK_VERSION;  // the project version (CMakeLists.txt), as `mlk version` prints it
  m.def("empty", [](const std::vector<int64_t>& shape, const std::string& dtype) {
    return PyTensor{unwrap(mlk::rt::HostBuffer::Allocate(dtype_of(dtype), shape))};
  });
  // For leak tests: result buffers alive, exports whose deleter has not run.
  // What mlk.check proved, opaque to Python (no constructor, nothing to set).
  py::class_<mlk::rt::CheckedType>(m, "CheckProof");
  // mlk.check: a tensor (a DLPack capsule, consumed) against a written type.
  m.def("check_type", [](const py::object& cap, const std::string& type, const std::map<std::string, int64_t>& dims) {
    auto t = consume(cap, "the checked tensor");
    const DLTensor& d = *t.tensor();
    std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
    auto r = mlk::rt::check_type(type, d.dtype, shape, mlk::DimEnv(dims.begin(), dims.end()));
    if (!r.ok()) throw BoundaryError(r.status().message());
    return py::dict(py::arg("type") = r->type, py::arg("refinements") = r->refinements,
                    py::arg("dims") = std::map<std::string, int64_t>(r->dims.begin(), r->dims.end()),
                    py::arg("proof") = *r);
  });
  m.def("snapshot_changes", &mlk::snapshot_changes);
  m.def("live_host_buffers", &mlk::rt::live_host_buffers);
  m.def("live_exports", &mlk::rt::live_exports);
  // The tolerance envelope of docs/numerics.md for a dtype and reduction length K.
  m.def("tolerance", [](const std::string& dtype, int64_t k, bool through_erf) {
    return envelope_dict(mlk::rt::envelope_for(dtype_of(dtype), k, through_erf));
  }, py::arg("dtype"), py::arg("k") = 1, py::arg("through_erf") = false);
}

// mlk.Runtime (a store, programs loaded through it, models), mlk.Model and
// model_call, the one-crossing call of a model.
void bind_runtime_and_models(py::module_& m) {
  py::class_<mlk::rt::Runtime, std::shared_ptr<mlk::rt::Runtime>>(m, "Runtime")
      .def(py::init([](const std::string& cache, const std::string& ns, const std::string& token,
                       const std::string& namespaces) {
             mlk::rt::Options o{cache, ns, token, namespaces};
             return std::shared_ptr<mlk::rt::Runtime>(unwrap(mlk::rt::Runtime::Open(o)));
           }),
           py::arg("cache") = "", py::arg("namespace") = "default", py::arg("token") = "", py::arg("namespaces") = "")
      .def_property_readonly("store_path", &mlk::rt::Runtime::store_path)
      // A .tl file under a precision policy ("f32", "bf16", "f16"), or an
      // `mlk build -o DIR` directory (its program as built).
      .def("program", [](std::shared_ptr<mlk::rt::Runtime> rt, const std::string& path, const std::string& precision) {
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec)) return PyProgram{rt, unwrap(rt->LoadArtifactDir(path))};
        auto p = mlk::parse_precision(precision);
        if (!p.ok()) throw py::value_error(p.status().message());
        return PyProgram{rt, unwrap(rt->LoadProgram(path, *p))};
      }, py::arg("path"), py::arg("precision") = "f32")
      // A program given as text (`name` stands for its file in messages).
      .def("program_source", [](std::shared_ptr<mlk::rt::Runtime> rt, const std::string& name, const std::string& text,
                                const std::string& precision) {
        auto p = mlk::parse_precision(precision);
        if (!p.ok()) throw py::value_error(p.status().message());
        std::optional<mlk::Expected<std::shared_ptr<const mlk::rt::Program>>> prog;
        {
          py::gil_scoped_release release;  // the runtime's lock may be held by a compile
          prog.emplace(rt->LoadSource(name, text, *p));
        }
        return PyProgram{rt, unwrap(std::move(*prog))};
      }, py::arg("name"), py::arg("text"), py::arg("precision") = "f32")
      // A model: its program, binding ("" = next to the program, or derived from `entry`) and weights
      // (runtime/model.h).
      .def("model", [](std::shared_ptr<mlk::rt::Runtime> rt, const std::string& program, const std::string& binding,
                       const std::string& weights, const std::string& targets, const std::string& entry,
                       const std::map<std::string, std::string>& rename) {
        auto policy = unwrap(mlk::rt::TargetPolicy::Parse(targets));
        return PyModel{rt, unwrap(mlk::rt::Model::Load(rt, {program, binding, weights, entry, rename}, policy))};
      }, py::arg("program"), py::arg("binding"), py::arg("weights"), py::arg("targets"), py::arg("entry") = "",
         py::arg("rename") = std::map<std::string, std::string>{});

  py::class_<PyModel>(m, "Model")
      // [(name, required)], in call order.
      .def_property_readonly("inputs",
                             [](const PyModel& p) {
                               std::vector<std::pair<std::string, bool>> out;
                               for (const auto& in : p.model->inputs()) out.emplace_back(in.name, in.zeros_like.empty());
                               return out;
                             })
      .def_property_readonly("result_dtype", [](const PyModel& p) { return mlk::dtype_name(p.model->result_fn().result_type.dtype); })
      .def_property_readonly("mapped_bytes", [](const PyModel& p) { return p.model->mapped_bytes(); })
      .def_property_readonly("copied_bytes", [](const PyModel& p) { return p.model->copied_bytes(); })
      // Which kernel runs each step for these inputs, one line per step (and
      // one per refinement the inputs' handles, `proven`, spared it).
      .def("selections", [](const PyModel& p, const py::list& caps, const py::list& proven) {
        Consumed ins = model_inputs(caps, *p.model);
        const std::vector<mlk::rt::Proven> handles = proven_of(proven);
        Status s;
        std::shared_ptr<mlk::rt::Model::Call> call;
        {
          py::gil_scoped_release release;  // the first call of a shape may compile kernels
          auto c = p.model->Prepare(ins.tensors, handles);
          if (c.ok()) call = std::move(*c); else s = c.status();
        }
        if (!s.ok()) raise(s);
        return mlk::rt::Model::Selections(*call);
      }, py::arg("caps"), py::arg("proven") = py::list());

  // One call of a model: every step checked and its kernel found, the result
  // made by `alloc(shape)` -> (result, its capsule), the steps run; the GIL
  // is released while kernels compile or run. `proven`: what the inputs' checked
  // handles proved (proven_of; Proven::arg indexes the inputs).
  m.def("model_call", [](const PyModel& p, const py::list& caps, const py::object& alloc, const py::list& proven) {
    Consumed ins = model_inputs(caps, *p.model);
    const std::vector<mlk::rt::Proven> handles = proven_of(proven);
    Status s;
    std::shared_ptr<mlk::rt::Model::Call> call;
    {
      py::gil_scoped_release release;
      auto c = p.model->Prepare(ins.tensors, handles);
      if (c.ok()) call = std::move(*c); else s = c.status();
    }
    if (!s.ok()) raise(s);
    py::tuple made = alloc(py::cast(mlk::rt::Model::OutputShape(*call)));
    auto out = consume_output(made[1], "the output of the model");
    {
      py::gil_scoped_release release;
      s = p.model->Run(*call, const_cast<DLTensor*>(out.tensor()));
    }
    if (!s.ok()) raise(s);
    return py::object(made[0]);
  }, py::arg("model"), py::arg("caps"), py::arg("alloc"), py::arg("proven") = py::list());
}

// mlk.Program: a loaded program's public fns, their signatures, shapes and
// envelopes, and the kernel chosen for a set of arguments.
void bind_program(py::module_& m) {
  py::class_<PyProgram>(m, "Program")
      // The envelope of fn's result for these arguments (mlk.testing).
      .def("envelope",
           [](const PyProgram& p, const std::string& fn, const py::list& caps, const std::map<std::string, int64_t>& given) {
             const auto* f = p.prog->module.find(fn);
             if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
             Consumed args = consume_all(caps, f);
             auto dims = unwrap(mlk::rt::dims_of(*f, args.tensors, given));
             return envelope_dict(unwrap(mlk::rt::envelope_of(p.prog->module, *f, dims)));
           })
      // Every parameter's concrete shape at `dims` (mlk.testing's generated inputs).
      .def("param_shapes",
           [](const PyProgram& p, const std::string& fn, const std::map<std::string, int64_t>& dims) {
             const auto* f = p.prog->module.find(fn);
             if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
             return unwrap(mlk::rt::param_shapes(*f, dims));
           })
      .def_property_readonly("source", [](const PyProgram& p) { return p.prog->text; })
      .def_property_readonly("file", [](const PyProgram& p) { return p.prog->file; })
      // The precision policy its module was compiled under ("f32", "bf16", "f16"); for an
      // artifact directory, its manifest's.
      .def_property_readonly("precision", [](const PyProgram& p) { return mlk::precision_name(p.prog->precision); })
      // fn's result shape for arguments of these shapes and dtypes, checked
      // as a call checks them (dims, refinements), with no data: what
      // mlk.torch's fake (meta) implementations return.
      .def("result_shape",
           [](const PyProgram& p, const std::string& fn, const std::vector<std::vector<int64_t>>& shapes,
              const std::map<std::string, int64_t>& given) {
             const auto* f = p.prog->module.find(fn);
             if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
             if (shapes.size() != f->params.size())
               throw BoundaryError("`" + fn + "` takes " + std::to_string(f->params.size()) + " arguments, got " +
                                   std::to_string(shapes.size()));
             alignas(64) static const unsigned char no_data[64] = {};  // never read: only shapes are checked
             std::vector<DLTensor> ts(shapes.size());
             std::vector<const DLTensor*> args;
             for (size_t i = 0; i < shapes.size(); ++i) {
               DLTensor& t = ts[i];
               t.data = const_cast<unsigned char*>(no_data);
               t.device = {kDLCPU, 0};
               t.ndim = static_cast<int32_t>(shapes[i].size());
               t.dtype = mlk::rt::to_dl(f->params[i].type.dtype);
               t.shape = const_cast<int64_t*>(shapes[i].data());
               t.strides = nullptr;
               t.byte_offset = 0;
               args.push_back(&t);
             }
             mlk::rt::Placement any;
             any.any_device = true;
             auto c = unwrap(mlk::rt::check_call_all(*f, args, {}, given, any));
             if (c.out_shapes.size() == 1) return py::cast(c.out_shape);
             return py::object(py::cast(c.out_shapes));  // a fn with several results: one shape each
           })
      .def_property_readonly("public_fns",
                             [](const PyProgram& p) {
                               std::vector<std::string> out;
                               for (const auto& f : p.prog->module.functions)
                                 if (f.is_public) out.push_back(f.name);
                               return out;
                             })
      // The CallPlan of fn `fn` under the policy `targets`, for fast_call
      // (python/fast_call.cpp): made once per fn of an Ops.
      .def("call_plan",
           [](const PyProgram& p, const std::string& fn, const std::string& targets) {
             return plan_capsule(std::make_shared<mlk::rt::CallPlan>(p.rt, p.prog, fn, p.policy(targets)));
           })
      // mlk signature's snapshot of every public fn (lang/c_declarations.h).
      .def("signature_snapshot", [](const PyProgram& p) { return mlk::signature_snapshot(p.prog->module); })
      .def("signature",
           [](const PyProgram& p, const std::string& fn) {
             const auto* f = p.prog->module.find(fn);
             if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
             return signature(*f);
           })
      // The kernel for these arguments: dims from their shapes (checked,
      // but for the refinements the handles' `proven` holds), the artifact
      // chosen by `targets`.
      .def("kernel",
           [](const PyProgram& p, const std::string& fn, const std::string& targets, const py::list& caps,
              const std::map<std::string, int64_t>& given, const py::list& proven) {
             const auto* f = p.prog->module.find(fn);
             if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
             Consumed args = consume_all(caps, f);
             mlk::rt::Placement any;
             any.any_device = true;  // the kernel, chosen from these dims, checks the device
             auto c = unwrap(mlk::rt::check_call(*f, args.tensors, nullptr, given, any, proven_of(proven)));
             return PyKernel{unwrap(p.rt->GetKernel(p.prog, fn, p.policy(targets), c.dims)), c.skipped};
           }, py::arg("fn"), py::arg("targets"), py::arg("caps"), py::arg("given"), py::arg("proven") = py::list());
}

// call and call_all: a Program's fn called in one crossing, with one result
// or several.
void bind_calls(py::module_& m) {
  // The whole call in one crossing (the hot path of mlk/__init__.py): the
  // arguments checked once for their dims and the result's shape, the kernel
  // looked up, the output made by `alloc(shape)` -> (result, its capsule),
  // the kernel run with the GIL released. Returns the result.
  // `stream`: for a CUDA kernel, the CUstream (an int, e.g. torch's
  // current_stream().cuda_stream; 0: the legacy default stream) the kernel
  // runs on; the capsules were made for it (__dlpack__(stream=...)).
  // `proven`: what the arguments' checked handles proved (proven_of).
  m.def("call", [](const PyProgram& p, const std::string& fn, const std::string& targets, const py::list& caps,
                   const std::map<std::string, int64_t>& given, const py::object& alloc, uintptr_t stream,
                   const py::list& proven) {
    const auto* f = p.prog->module.find(fn);
    if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
    Consumed args = consume_all(caps, f);
    mlk::rt::Placement any;
    any.any_device = true;  // the kernel chosen below checks the devices
    mlk::rt::RunOptions ro;
    ro.proven = proven_of(proven);
    auto checked = unwrap(mlk::rt::check_call(*f, args.tensors, nullptr, given, any, ro.proven));
    auto k = unwrap(p.rt->GetKernel(p.prog, fn, p.policy(targets), checked.dims));
    py::tuple made = alloc(py::cast(checked.out_shape));
    auto out = consume_output(made[1], "the output of `" + fn + "`");
    Status s;
    {
      py::gil_scoped_release release;  // the consumed tensors live until the call returns
      ro.cuda_stream = reinterpret_cast<void*>(stream);
      s = k->Run(args.tensors, const_cast<DLTensor*>(out.tensor()), ro);
    }
    if (!s.ok()) raise(s);
    return py::object(made[0]);
  }, py::arg("program"), py::arg("fn"), py::arg("targets"), py::arg("caps"), py::arg("given"), py::arg("alloc"),
     py::arg("stream") = 0, py::arg("proven") = py::list());

  // The same for a fn with several results: `allocs` holds one alloc per
  // result; returns the tuple of results, computed by one run.
  m.def("call_all", [](const PyProgram& p, const std::string& fn, const std::string& targets, const py::list& caps,
                       const std::map<std::string, int64_t>& given, const py::list& allocs, const py::list& proven) {
    const auto* f = p.prog->module.find(fn);
    if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
    return run_all(*f, caps, given, allocs, proven,
                   [&](const mlk::DimEnv& dims) { return unwrap(p.rt->GetKernel(p.prog, fn, p.policy(targets), dims)); });
  }, py::arg("program"), py::arg("fn"), py::arg("targets"), py::arg("caps"), py::arg("given"), py::arg("allocs"),
     py::arg("proven") = py::list());
}

// mlk.select: a Selector over candidate programs and directories, the
// SelectedKernel it picks, and select_call / select_call_all, which run it.
void bind_selection(py::module_& m) {
  // mlk.select: `items` is a list of (rank, candidate, policy): rank "prefer" or
  // "fallback"; candidate a Program (mlk.load's; `policy` is its Ops' target) or
  // the path of an `mlk build -o DIR` directory, loaded by `rt` (a directory
  // this machine cannot load becomes a candidate that says why; `policy`, when
  // not empty, says what the directory must be to load, e.g. signed:KEYS).
  m.def("select", [](const py::list& items, std::shared_ptr<mlk::rt::Runtime> rt) {
    std::vector<mlk::rt::Candidate> cs;
    for (const auto& item : items) {
      auto t = item.cast<py::tuple>();
      const std::string rank = t[0].cast<std::string>();
      if (rank != "prefer" && rank != "fallback") throw py::value_error("rank `" + rank + "`: prefer or fallback");
      mlk::rt::Candidate c;
      if (py::isinstance<py::str>(t[1])) {
        c = unwrap(mlk::rt::dir_candidate(rt, t[1].cast<std::string>()));
        // A directory's policy: what it must be to load (signed:KEYS); none
        // given, the machine's trust list applies (Runtime::directory_allowed).
        if (const std::string pol = t[2].cast<std::string>(); !pol.empty())
          c.policy = unwrap(mlk::rt::TargetPolicy::Parse(pol));
      } else {
        const auto& p = t[1].cast<const PyProgram&>();
        c = mlk::rt::program_candidate(p.rt, p.prog, p.policy(t[2].cast<std::string>()));
      }
      cs.push_back(rank == "prefer" ? mlk::rt::prefer(std::move(c)) : mlk::rt::fallback(std::move(c)));
    }
    return PySelector{unwrap(mlk::rt::select(std::move(cs)))};
  });

  py::class_<PySelector>(m, "Selector")
      .def_property_readonly("fns", [](const PySelector& s) { return s.s->fns(); })
      .def("signature", [](const PySelector& s, const std::string& fn) { return signature(s.fn(fn)); })
      // The shape-free choice for fn (choice_dict).
      .def("choose", [](const PySelector& s, const std::string& fn) { return choice_dict(s.s->Choose(fn)); })
      // The kernel these arguments would run, and why (PyPicked).
      .def("kernel", [](const PySelector& s, const std::string& fn, const py::list& caps,
                        const std::map<std::string, int64_t>& given, const py::list& proven) {
        const auto& f = s.fn(fn);
        Consumed args = consume_all(caps, &f);
        mlk::rt::Placement any;
        any.any_device = true;  // the kernel, chosen from these dims, checks the device
        auto c = unwrap(mlk::rt::check_call(f, args.tensors, nullptr, given, any, proven_of(proven)));
        return PyPicked{unwrap(s.s->GetKernel(fn, c.dims)), c.skipped};
      }, py::arg("fn"), py::arg("caps"), py::arg("given"), py::arg("proven") = py::list());

  py::class_<PyPicked>(m, "SelectedKernel")
      // Which candidate and why, then the chosen kernel's own selection.
      .def_property_readonly("selection", [](const PyPicked& k) {
        std::string s = k.p.choice.explain();
        for (const auto& line : k.skipped) s += "\n  " + line;  // as Selection::explain(skipped)
        return s;
      })
      .def_property_readonly("choice", [](const PyPicked& k) { return choice_dict(k.p.choice); })
      .def_property_readonly("candidate", [](const PyPicked& k) { return k.p.choice.chosen()->index; })
      .def_property_readonly("profile", [](const PyPicked& k) { return k.p.kernel->selection().profile; })
      .def_property_readonly("source", [](const PyPicked& k) { return mlk::rt::source_name(k.p.kernel->selection().source); })
      .def_property_readonly("on_cuda", [](const PyPicked& k) { return k.p.kernel->on_cuda(); });

  // mlk.call for a selector: the candidate's kernel for these arguments, run
  // into the output `alloc(shape)` makes; the GIL is released while it runs.
  m.def("select_call", [](const PySelector& sel, const std::string& fn, const py::list& caps,
                          const std::map<std::string, int64_t>& given, const py::object& alloc, uintptr_t stream,
                          const py::list& proven) {
    const auto& f = sel.fn(fn);
    Consumed args = consume_all(caps, &f);
    mlk::rt::Placement any;
    any.any_device = true;  // the kernel chosen below checks the devices
    mlk::rt::RunOptions ro;
    ro.proven = proven_of(proven);
    auto checked = unwrap(mlk::rt::check_call(f, args.tensors, nullptr, given, any, ro.proven));
    auto picked = unwrap(sel.s->GetKernel(fn, checked.dims));
    py::tuple made = alloc(py::cast(checked.out_shape));
    auto out = consume_output(made[1], "the output of `" + fn + "`");
    Status s;
    {
      py::gil_scoped_release release;
      ro.cuda_stream = reinterpret_cast<void*>(stream);
      s = picked.kernel->Run(args.tensors, const_cast<DLTensor*>(out.tensor()), ro);
    }
    if (!s.ok()) raise(s);
    return py::object(made[0]);
  }, py::arg("selector"), py::arg("fn"), py::arg("caps"), py::arg("given"), py::arg("alloc"), py::arg("stream") = 0,
     py::arg("proven") = py::list());

  // The same for a fn with several results (one alloc per result; a tuple back).
  m.def("select_call_all", [](const PySelector& sel, const std::string& fn, const py::list& caps,
                              const std::map<std::string, int64_t>& given, const py::list& allocs,
                              const py::list& proven) {
    return run_all(sel.fn(fn), caps, given, allocs, proven,
                   [&](const mlk::DimEnv& dims) { return unwrap(sel.s->GetKernel(fn, dims)).kernel; });
  }, py::arg("selector"), py::arg("fn"), py::arg("caps"), py::arg("given"), py::arg("allocs"),
     py::arg("proven") = py::list());
}

// mlk.Kernel: a kernel GetKernel chose, its selection, output shape and run.
void bind_kernel(py::module_& m) {
  py::class_<PyKernel>(m, "Kernel")
      // Its selection, then the refinements the call's handles proved (not checked again).
      .def_property_readonly("selection", [](const PyKernel& k) { return k.k->selection().explain(k.skipped); })
      .def_property_readonly("profile", [](const PyKernel& k) { return k.k->selection().profile; })
      // "exact", "other-shape", "shipped", "default-jit" or "directory".
      .def_property_readonly("source", [](const PyKernel& k) { return mlk::rt::source_name(k.k->selection().source); })
      // Whether it is a CUDA kernel (it takes torch CUDA tensors in place).
      .def_property_readonly("on_cuda", [](const PyKernel& k) { return k.k->on_cuda(); })
      .def("output_shape",
           [](const PyKernel& k, const py::list& caps) {
             Consumed args = consume_all(caps, &k.k->signature());
             return unwrap(k.k->OutputShape(args.tensors));
           })
      .def("run", [](const PyKernel& k, const py::list& caps, const py::object& out, uintptr_t stream) {
        Consumed args = consume_all(caps, &k.k->signature());
        auto o = consume_output(out, "the output of `" + k.k->signature().name + "`");
        Status s;
        {
          py::gil_scoped_release release;  // the kernel may take a while; the consumed tensors live until it returns
          mlk::rt::RunOptions ro;
          ro.cuda_stream = reinterpret_cast<void*>(stream);
          s = k.k->Run(args.tensors, const_cast<DLTensor*>(o.tensor()), ro);
        }
        if (!s.ok()) raise(s);
      }, py::arg("caps"), py::arg("out"), py::arg("stream") = 0);
}

}  // namespace

PYBIND11_MODULE(_mlk, m) {
  m.doc() = "mlk runtime binding (use the mlk package, not this module)";
  bind_errors_and_buffers(m);
  bind_runtime_and_models(m);
  bind_fast_call(m);
  bind_program(m);
  bind_calls(m);
  bind_selection(m);
  bind_kernel(m);
}
