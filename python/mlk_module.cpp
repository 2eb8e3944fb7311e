// mlk._mlk: the Python binding of the runtime (runtime/runtime.h), on DLPack
// capsules. python/mlk/__init__.py turns torch tensors (or numpy arrays) into
// capsules and allocates outputs; every check happens here, in C++, with the
// same messages as the C++ runtime.
//
// Capsules are borrowed, not consumed: the name stays "dltensor", so the
// capsule's destructor releases the producer's tensor when Python drops it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/boundary.h"
#include "runtime/model.h"
#include "runtime/runtime.h"

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

const DLTensor* tensor_of(const py::handle& cap, const std::string& what) {
  if (!PyCapsule_CheckExact(cap.ptr())) throw BoundaryError(what + ": not a DLPack capsule");
  if (!PyCapsule_IsValid(cap.ptr(), "dltensor"))
    throw BoundaryError(what + ": the DLPack capsule is not named \"dltensor\" (already consumed?)");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  if (!m) throw BoundaryError(what + ": empty DLPack capsule");
  return &m->dl_tensor;
}

std::vector<const DLTensor*> tensors_of(const py::list& caps) {
  std::vector<const DLTensor*> out;
  for (size_t i = 0; i < caps.size(); ++i) out.push_back(tensor_of(caps[i], "argument " + std::to_string(i)));
  return out;
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
};

// A model (runtime/model.h); the Runtime it runs on lives as long as it.
struct PyModel {
  std::shared_ptr<mlk::rt::Runtime> rt;
  std::shared_ptr<const mlk::rt::Model> model;
};

// The model's inputs from a list of capsules, None for an input left out.
std::vector<const DLTensor*> model_inputs(const py::list& caps, const mlk::rt::Model& m) {
  std::vector<const DLTensor*> out;
  for (size_t i = 0; i < caps.size(); ++i)
    out.push_back(caps[i].is_none() ? nullptr
                                    : tensor_of(caps[i], "input " + std::to_string(i) +
                                                             (i < m.inputs().size() ? " `" + m.inputs()[i].name + "`" : "")));
  return out;
}

py::dict signature(const mlk::ir::Function& f) {
  py::list params;
  for (const auto& p : f.params) {
    py::dict d;
    d["name"] = p.name;
    d["dtype"] = mlk::dtype_name(p.type.dtype);
    d["rank"] = p.type.shape.size();
    params.append(d);
  }
  py::dict s;
  s["name"] = f.name;
  s["params"] = params;
  s["result_dtype"] = mlk::dtype_name(f.result_type.dtype);
  s["result_rank"] = f.result_type.shape.size();
  s["unbound_dims"] = f.unbound_dims();
  return s;
}

}  // namespace

PYBIND11_MODULE(_mlk, m) {
  m.doc() = "mlk runtime binding (use the mlk package, not this module)";
  auto base = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<BoundaryError>(m, "BoundaryError", PyExc_ValueError);
  py::register_exception<NotFoundError>(m, "NotFoundError", PyExc_LookupError);
  py::register_exception<CorruptionError>(m, "CorruptionError", base.ptr());

  py::class_<mlk::rt::Runtime, std::shared_ptr<mlk::rt::Runtime>>(m, "Runtime")
      .def(py::init([](const std::string& cache, const std::string& ns, const std::string& token) {
             mlk::rt::Options o{cache, ns, token};
             return std::shared_ptr<mlk::rt::Runtime>(unwrap(mlk::rt::Runtime::Open(o)));
           }),
           py::arg("cache") = "", py::arg("namespace") = "default", py::arg("token") = "")
      .def_property_readonly("store_path", &mlk::rt::Runtime::store_path)
      // A .tl file, or an `mlk build -o DIR` directory.
      .def("program", [](std::shared_ptr<mlk::rt::Runtime> rt, const std::string& path) {
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec)) return PyProgram{rt, unwrap(rt->LoadArtifactDir(path))};
        return PyProgram{rt, unwrap(rt->LoadProgram(path))};
      })
      // A model: its program, binding ("" = next to the program) and weights (runtime/model.h).
      .def("model", [](std::shared_ptr<mlk::rt::Runtime> rt, const std::string& program, const std::string& binding,
                       const std::string& weights, const std::string& targets) {
        auto policy = unwrap(mlk::rt::TargetPolicy::Parse(targets));
        return PyModel{rt, unwrap(mlk::rt::Model::Load(rt, {program, binding, weights}, policy))};
      });

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
      // Which kernel runs each step for these inputs, one line per step.
      .def("selections", [](const PyModel& p, const py::list& caps) {
        auto ins = model_inputs(caps, *p.model);
        Status s;
        std::shared_ptr<mlk::rt::Model::Call> call;
        {
          py::gil_scoped_release release;  // the first call of a shape may compile kernels
          auto c = p.model->Prepare(ins);
          if (c.ok()) call = std::move(*c); else s = c.status();
        }
        if (!s.ok()) raise(s);
        return mlk::rt::Model::Selections(*call);
      });

  // One call of a model: every step checked and its kernel found, the result
  // made by `alloc(shape)` -> (result, its capsule), the steps run; the GIL
  // is released while kernels compile or run.
  m.def("model_call", [](const PyModel& p, const py::list& caps, const py::object& alloc) {
    auto ins = model_inputs(caps, *p.model);
    Status s;
    std::shared_ptr<mlk::rt::Model::Call> call;
    {
      py::gil_scoped_release release;
      auto c = p.model->Prepare(ins);
      if (c.ok()) call = std::move(*c); else s = c.status();
    }
    if (!s.ok()) raise(s);
    py::tuple made = alloc(py::cast(mlk::rt::Model::OutputShape(*call)));
    const DLTensor* o = tensor_of(made[1], "the output");
    {
      py::gil_scoped_release release;
      s = p.model->Run(*call, const_cast<DLTensor*>(o));
    }
    if (!s.ok()) raise(s);
    return py::object(made[0]);
  });

  py::class_<PyProgram>(m, "Program")
      .def_property_readonly("public_fns",
                             [](const PyProgram& p) {
                               std::vector<std::string> out;
                               for (const auto& f : p.prog->module.functions)
                                 if (f.is_public) out.push_back(f.name);
                               return out;
                             })
      .def("signature",
           [](const PyProgram& p, const std::string& fn) {
             const auto* f = p.prog->module.find(fn);
             if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
             return signature(*f);
           })
      // The kernel for these arguments: dims from their shapes (checked),
      // the artifact chosen by `targets`.
      .def("kernel",
           [](const PyProgram& p, const std::string& fn, const std::string& targets, const py::list& caps,
              const std::map<std::string, int64_t>& given) {
             const auto* f = p.prog->module.find(fn);
             if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
             auto args = tensors_of(caps);
             auto dims = unwrap(mlk::rt::dims_of(*f, args, given));
             return PyKernel{unwrap(p.rt->GetKernel(p.prog, fn, p.policy(targets), dims))};
           });

  // The whole call in one crossing (the hot path of mlk/__init__.py): the
  // arguments checked once for their dims and the result's shape, the kernel
  // looked up, the output made by `alloc(shape)` -> (result, its capsule),
  // the kernel run with the GIL released. Returns the result.
  m.def("call", [](const PyProgram& p, const std::string& fn, const std::string& targets, const py::list& caps,
                   const std::map<std::string, int64_t>& given, const py::object& alloc) {
    const auto* f = p.prog->module.find(fn);
    if (!f || !f->is_public) throw NotFoundError(p.prog->file + " has no public fn `" + fn + "`");
    auto args = tensors_of(caps);
    auto checked = unwrap(mlk::rt::check_call(*f, args, nullptr, given));
    auto k = unwrap(p.rt->GetKernel(p.prog, fn, p.policy(targets), checked.dims));
    py::tuple made = alloc(py::cast(checked.out_shape));
    const DLTensor* o = tensor_of(made[1], "the output");
    Status s;
    {
      py::gil_scoped_release release;  // tensors stay referenced by the caller
      s = k->Run(args, const_cast<DLTensor*>(o));
    }
    if (!s.ok()) raise(s);
    return py::object(made[0]);
  });

  py::class_<PyKernel>(m, "Kernel")
      .def_property_readonly("selection", [](const PyKernel& k) { return k.k->selection().explain(); })
      .def_property_readonly("profile", [](const PyKernel& k) { return k.k->selection().profile; })
      // "exact", "other-shape", "default-jit" or "directory".
      .def_property_readonly("source", [](const PyKernel& k) { return mlk::rt::source_name(k.k->selection().source); })
      .def("output_shape", [](const PyKernel& k, const py::list& caps) { return unwrap(k.k->OutputShape(tensors_of(caps))); })
      .def("run", [](const PyKernel& k, const py::list& caps, const py::object& out) {
        auto args = tensors_of(caps);
        const DLTensor* o = tensor_of(out, "the output");
        Status s;
        {
          py::gil_scoped_release release;  // the kernel may take a while; tensors stay referenced by the caller
          s = k.k->Run(args, const_cast<DLTensor*>(o));
        }
        if (!s.ok()) raise(s);
      });
}
