// mlk._arrow: Dataframe arguments from Python objects with __arrow_c_stream__
// (a pyarrow Table or RecordBatchReader, or any producer of the Arrow C
// stream interface), read by the strict reader (interop/arrow_reader.h,
// read_c_stream) against the declaration the fn's Dataframe type makes
// (interop/arrow_schema.h).
//
// A separate extension module, so that `import mlk` does not load libarrow:
// python/mlk/arrow.py imports it on the first Dataframe argument. It links
// the Arrow reader (mlk_arrow) and includes no Arrow header.
//
// read() gives one ArrowColumn per non-nullable column: a DLPack producer
// (__dlpack__, __dlpack_device__) over the column's values, zero-copy in the
// producer's memory where the layout allows (one batch, no null, aligned,
// not Bool), else over one copy; `copied` says which. A Category column is
// its codes (int32) with its dictionary as text in `dictionary`. Bool columns are DLPack
// bool (one byte per value), BF16 columns DLPack bfloat16. The Arrow memory
// (or the copy) stays alive while any capsule or ArrowColumn of the read does.
#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "interop/arrow_reader.h"
#include "interop/arrow_schema.h"
#include "lang/frontend.h"

namespace py = pybind11;

namespace {

struct Read {
  mlk::arrow_ipc::Table table;
};

struct ArrowColumn {
  std::shared_ptr<const Read> read;
  size_t index = 0;
  const mlk::arrow_ipc::Column& col() const { return read->table.columns[index]; }
};

DLDataType dl_dtype(mlk::DType t) {
  switch (t) {
    case mlk::DType::I32: return {kDLInt, 32, 1};
    case mlk::DType::I64: return {kDLInt, 64, 1};
    case mlk::DType::F16: return {kDLFloat, 16, 1};
    case mlk::DType::BF16: return {kDLBfloat, 16, 1};
    case mlk::DType::Bool: return {6, 8, 1};  // kDLBool (DLPack >= 0.8; this header predates it): torch.bool
    case mlk::DType::F32: return {kDLFloat, 32, 1};
    default: return {kDLFloat, 64, 1};
  }
}

struct Managed {
  DLManagedTensor m{};
  std::shared_ptr<const Read> keep;
  std::vector<int64_t> shape;
};

// A legacy ("dltensor") capsule: mlk's consumer and torch take it.
py::capsule export_column(const ArrowColumn& c) {
  auto* h = new Managed;
  h->keep = c.read;
  h->shape = c.col().values.shape;
  DLTensor& t = h->m.dl_tensor;
  t.data = const_cast<uint8_t*>(c.col().data());
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(h->shape.size());
  t.dtype = dl_dtype(c.col().values.dtype);
  t.shape = h->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  h->m.manager_ctx = h;
  h->m.deleter = [](DLManagedTensor* m) { delete static_cast<Managed*>(m->manager_ctx); };
  return py::capsule(&h->m, "dltensor", [](PyObject* cap) {
    // Deleted here only when no consumer renamed it to "used_dltensor".
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      if (m && m->deleter) m->deleter(m);
    }
  });
}

// The checked program of `source`, compiled once per text.
const mlk::ir::Function& function_of(const std::string& source, const std::string& fn) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<mlk::FrontendResult>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& r = cache[source];
  if (!r) r = std::make_shared<mlk::FrontendResult>(mlk::compile_source("<program>", source));
  const auto* f = r->module.find(fn);
  if (f == nullptr) throw py::value_error("the program has no fn `" + fn + "`");
  return *f;
}

// The column tensors of Dataframe parameter `frame` of `fn` from `obj`.
py::list read_frame(const py::object& obj, const std::string& source, const std::string& fn, const std::string& frame,
              const std::map<std::string, int64_t>& dims, const std::string& where) {
  const mlk::ir::Function& f = function_of(source, fn);
  const mlk::ir::Frame* fr = nullptr;
  for (const auto& x : f.frames)
    if (x.name == frame) fr = &x;
  if (fr == nullptr) throw py::value_error("`" + fn + "` has no Dataframe parameter `" + frame + "`");
  if (!py::hasattr(obj, "__arrow_c_stream__"))
    throw py::type_error(where + ": a " + std::string(py::str(py::type::of(obj).attr("__name__"))) +
                         ", not a table (an object with __arrow_c_stream__: a pyarrow Table or RecordBatchReader)");
  py::object cap = obj.attr("__arrow_c_stream__")();
  if (!PyCapsule_IsValid(cap.ptr(), "arrow_array_stream"))
    throw py::type_error(where + ": __arrow_c_stream__() did not return an \"arrow_array_stream\" capsule");
  auto* stream = static_cast<ArrowArrayStream*>(PyCapsule_GetPointer(cap.ptr(), "arrow_array_stream"));
  mlk::arrow_ipc::ReadOptions options;
  options.zero_copy = true;
  auto table = mlk::arrow_ipc::read_c_stream(stream, mlk::arrow_ipc::schema_of(*fr, dims), where, options);
  if (!table.ok()) throw py::value_error(table.status().message());
  auto r = std::make_shared<Read>();
  r->table = std::move(*table);
  py::list out;
  for (size_t i = 0; i < fr->columns.size(); ++i)
    if (fr->columns[i].param >= 0) out.append(ArrowColumn{r, i});
  return out;
}

}  // namespace

PYBIND11_MODULE(_arrow, m) {
  m.doc() = "Dataframe arguments from Arrow C streams (python/arrow_ingress.cpp)";
  py::class_<ArrowColumn>(m, "ArrowColumn")
      .def_property_readonly("name", [](const ArrowColumn& c) { return c.col().name; })
      .def_property_readonly("shape", [](const ArrowColumn& c) { return py::tuple(py::cast(c.col().values.shape)); })
      .def_property_readonly("dtype", [](const ArrowColumn& c) { return std::string(mlk::dtype_name(c.col().values.dtype)); })
      .def_property_readonly("copied", [](const ArrowColumn& c) { return c.col().view == nullptr; })
      .def_property_readonly("stream_dims",  // the dimensions its stream bound: rows, list sizes, a Category's K
                             [](const ArrowColumn& c) { return c.read->table.dims; })
      .def_property_readonly("dictionary",  // a Category column's dictionary (code c names [c]), else None
                             [](const ArrowColumn& c) -> py::object {
                               if (!c.col().dictionary) return py::none();
                               return py::cast(*c.col().dictionary);
                             })
      .def_property_readonly("data_ptr", [](const ArrowColumn& c) { return reinterpret_cast<uintptr_t>(c.col().data()); })
      .def("__dlpack__", [](const ArrowColumn& c, py::kwargs) { return export_column(c); })
      .def("__dlpack_device__", [](const ArrowColumn&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); });
  m.def("read", &read_frame, py::arg("obj"), py::arg("source"), py::arg("fn"), py::arg("frame"), py::arg("dims"),
        py::arg("where"));
  m.def("arrow_version", &mlk::arrow_ipc::arrow_version);
}
