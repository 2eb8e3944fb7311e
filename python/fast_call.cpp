// mlk._mlk.fast_call: the hot path of a Python call (python/mlk/__init__.py,
// _Fn.__call__) for the common case, torch CPU tensors (and Python numbers
// for scalar parameters) in, a new torch tensor out. It takes the tensors
// through DLPack's C exchange API (DLPack 1.3, `__dlpack_c_exchange_api__`
// on the tensor type: a DLTensor filled in place, no capsule, no Python
// call), checks the call against a CallPlan (runtime/call_plan.h: the full
// boundary check once per signature, the per-call rules after), lets torch
// allocate the result through the same API, and runs the kernel.
//
// Contract: fast_call returns the result, or NotImplemented having done
// nothing observable (no kernel run whose result is returned, no argument
// touched), and then the caller takes the general path, which checks and
// raises with its own messages. It declines whatever it does not handle
// exactly as the general path would: a fn with record or Dataframe
// parameters or a Bool result, another tensor type, a torch without the
// exchange API, a tensor that requires grad, carries torch's negative bit or
// is not on the CPU, a bool tensor, a number for a parameter of another
// dtype than F32, F64, I32 or I64, any boundary error, a kernel that fails
// (the general path runs it again and raises its error), any exception.
//
// The GIL: the views the exchange API fills borrow the tensors, valid only
// while the GIL is held (another thread could resize or free a tensor
// otherwise). A small call keeps the GIL; a call of at least kLargeCall
// elements (arguments and result) takes an owning record of each tensor
// (as the general path's capsules do), releases the GIL while the kernel
// runs, and lets the records go with the GIL held again.
#include "python/fast_call.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/call_plan.h"
#include "runtime/dlpack.h"

namespace py = pybind11;

namespace {

// DLPack 1.3's DLPackExchangeAPI, with its layout (the build's dlpack.h
// predates it): the header (version, the previous API) and five entries.
struct ExchangeApi {
  DLPackVersion version;
  void* prev_api;
  int (*managed_tensor_allocator)(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                                  void (*set_error)(void* ctx, const char* kind, const char* message));
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, DLManagedTensorVersioned** out);
  int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);
  int (*current_work_stream)(int device_type, int32_t device_id, void** out_stream);
};

// torch.Tensor and its exchange API, looked up once torch is imported
// (nullptr api: this torch has none, or an unusable one).
struct Torch {
  PyTypeObject* tensor = nullptr;
  const ExchangeApi* api = nullptr;
  PyObject* requires_grad = nullptr;  // interned attribute names
  PyObject* is_neg = nullptr;
};

const Torch* torch() {
  static Torch t;
  static bool looked = false;
  if (looked) return t.api ? &t : nullptr;
  PyObject* mod = PyImport_GetModule(py::str("torch").ptr());  // only once the caller has imported torch
  if (!mod) {
    PyErr_Clear();
    return nullptr;
  }
  looked = true;
  py::object torch_mod = py::reinterpret_steal<py::object>(mod);
  if (!py::hasattr(torch_mod, "Tensor")) return nullptr;
  py::object type = torch_mod.attr("Tensor");
  if (!py::hasattr(type, "__dlpack_c_exchange_api__")) return nullptr;
  py::object cap = type.attr("__dlpack_c_exchange_api__");
  auto* api = static_cast<const ExchangeApi*>(PyCapsule_GetPointer(cap.ptr(), "dlpack_exchange_api"));
  if (!api) {
    PyErr_Clear();
    return nullptr;
  }
  if (api->version.major != 1 || api->version.minor < 3 || !api->managed_tensor_allocator ||
      !api->managed_tensor_to_py_object_no_sync || !api->dltensor_from_py_object_no_sync)
    return nullptr;
  t.tensor = reinterpret_cast<PyTypeObject*>(type.release().ptr());  // kept for the process's life
  t.requires_grad = PyUnicode_InternFromString("requires_grad");
  t.is_neg = PyUnicode_InternFromString("is_neg");
  t.api = api;
  return &t;
}

// Whether attribute or method result `r` (a new reference, or NULL) is False.
bool is_false(PyObject* r) {
  if (!r) {
    PyErr_Clear();
    return false;
  }
  const bool f = r == Py_False;
  Py_DECREF(r);
  return f;
}

// A Python number as the 0-d tensor of a scalar parameter of dtype `dt`,
// in `slot`; false when the general path must take it.
bool number(PyObject* a, mlk::DType dt, int64_t* slot, DLTensor& t) {
  if (PyBool_Check(a)) return false;
  const bool is_float = PyFloat_CheckExact(a);
  if (!is_float && !PyLong_CheckExact(a)) return false;
  switch (dt) {
    case mlk::DType::F32: {
      const double v = is_float ? PyFloat_AS_DOUBLE(a) : PyLong_AsDouble(a);
      if (PyErr_Occurred()) return PyErr_Clear(), false;
      const float f = static_cast<float>(v);
      std::memcpy(slot, &f, sizeof f);
      break;
    }
    case mlk::DType::F64: {
      const double v = is_float ? PyFloat_AS_DOUBLE(a) : PyLong_AsDouble(a);
      if (PyErr_Occurred()) return PyErr_Clear(), false;
      std::memcpy(slot, &v, sizeof v);
      break;
    }
    case mlk::DType::I32:
    case mlk::DType::I64: {
      if (is_float) return false;
      const long long v = PyLong_AsLongLong(a);
      if (PyErr_Occurred()) return PyErr_Clear(), false;
      if (dt == mlk::DType::I32) {
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) return false;
        const int32_t i = static_cast<int32_t>(v);
        std::memcpy(slot, &i, sizeof i);
      } else {
        const int64_t i = v;
        std::memcpy(slot, &i, sizeof i);
      }
      break;
    }
    default: return false;
  }
  t = DLTensor{};
  t.data = slot;
  t.device = {kDLCPU, 0};
  t.ndim = 0;
  t.dtype = mlk::rt::to_dl(dt);
  return true;
}

void set_error(void* ctx, const char* kind, const char* message) {
  *static_cast<std::string*>(ctx) = std::string(kind ? kind : "") + ": " + (message ? message : "");
}

constexpr size_t kMaxArgs = 16;  // as Kernel::kMaxPlannedArgs
constexpr uint8_t kDLBoolCode = 6;  // DLPack 1.x's kDLBool, which the build's dlpack.h predates
constexpr int64_t kLargeCall = 1 << 14;  // elements of the arguments and the result: the GIL is released

// Owning records of a call's tensors, deleted with the GIL held.
struct Owned {
  DLManagedTensorVersioned* m[kMaxArgs] = {};
  ~Owned() {
    for (auto* t : m)
      if (t && t->deleter) t->deleter(t);
  }
};

// The call's arguments as DLTensors in dl (ptrs pointing at them), numbers
// in slots; false to decline.
bool take_arguments(const Torch& t, const mlk::ir::Function& f, PyObject* args, size_t n, DLTensor* dl,
                    int64_t* slots, const DLTensor** ptrs) {
  bool any_tensor = false;
  for (size_t i = 0; i < n; ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, static_cast<Py_ssize_t>(i));
    ptrs[i] = &dl[i];
    if (Py_TYPE(a) == t.tensor) {
      if (t.api->dltensor_from_py_object_no_sync(a, &dl[i]) != 0) return PyErr_Clear(), false;
      if (dl[i].device.device_type != kDLCPU || dl[i].dtype.code == kDLBoolCode) return false;
      if (!is_false(PyObject_GetAttr(a, t.requires_grad))) return false;
      if (!is_false(PyObject_CallMethodNoArgs(a, t.is_neg))) return false;
      any_tensor = true;
    } else if (f.params[i].type.shape.empty()) {
      if (!number(a, f.params[i].type.dtype, &slots[i], dl[i])) return false;
    } else {
      return false;
    }
  }
  return any_tensor;
}

py::object fast_call(mlk::rt::CallPlan& plan, PyObject* args) {
  const py::object decline = py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const mlk::ir::Function* f = plan.fn();
  const Torch* t = torch();
  const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(args));
  if (!f || !t || n > kMaxArgs || n != f->params.size() || !f->records.empty() || !f->frames.empty() ||
      f->result_type.dtype == mlk::DType::Bool)
    return decline;
  DLTensor dl[kMaxArgs];
  int64_t slots[kMaxArgs];
  const DLTensor* ptrs[kMaxArgs];
  if (!take_arguments(*t, *f, args, n, dl, slots, ptrs)) return decline;
  auto step = plan.Plan(ptrs, n);
  if (!step.ok()) return decline;
  const mlk::rt::CallPlan::Step& s = **step;
  const std::vector<int64_t>& shape = s.call.out_shape;
  DLTensor proto{};
  proto.device = {kDLCPU, 0};
  proto.ndim = static_cast<int32_t>(shape.size());
  proto.dtype = s.out_dtype;
  proto.shape = const_cast<int64_t*>(shape.data());  // read only
  int64_t work = s.out_count;
  for (int64_t c : s.counts) work += c;
  Owned owned;
  if (work >= kLargeCall) {  // owning records of the tensors, so that the GIL can go
    for (size_t i = 0; i < n; ++i) {
      PyObject* a = PyTuple_GET_ITEM(args, static_cast<Py_ssize_t>(i));
      if (Py_TYPE(a) != t->tensor) continue;
      if (t->api->managed_tensor_from_py_object_no_sync(a, &owned.m[i]) != 0 || !owned.m[i]) return PyErr_Clear(), decline;
      ptrs[i] = &owned.m[i]->dl_tensor;
    }
  }
  DLManagedTensorVersioned* out = nullptr;
  std::string error;
  if (t->api->managed_tensor_allocator(&proto, &out, &error, set_error) != 0 || !out) return PyErr_Clear(), decline;
  mlk::Status st;
  if (work >= kLargeCall) {
    py::gil_scoped_release release;
    st = plan.Run(s, ptrs, n, &out->dl_tensor);
  } else {
    st = plan.Run(s, ptrs, n, &out->dl_tensor);
  }
  if (!st.ok()) {
    if (out->deleter) out->deleter(out);
    return decline;
  }
  void* result = nullptr;
  if (t->api->managed_tensor_to_py_object_no_sync(out, &result) != 0 || !result) return PyErr_Clear(), decline;
  return py::reinterpret_steal<py::object>(static_cast<PyObject*>(result));
}

const char* const kPlanName = "mlk.call_plan";

// fast_call(plan, args): METH_FASTCALL, so that the call costs no argument
// parsing; `plan` is a capsule of plan_capsule, `args` a tuple.
PyObject* fast_call_entry(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
  if (argc != 2 || !PyTuple_Check(argv[1])) {
    PyErr_SetString(PyExc_TypeError, "fast_call(plan, args): a plan and a tuple");
    return nullptr;
  }
  auto* plan = static_cast<std::shared_ptr<mlk::rt::CallPlan>*>(PyCapsule_GetPointer(argv[0], kPlanName));
  if (!plan) return nullptr;
  try {
    return fast_call(**plan, argv[1]).release().ptr();
  } catch (...) {  // declined: the general path says what is wrong
    PyErr_Clear();
  }
  Py_INCREF(Py_NotImplemented);
  return Py_NotImplemented;
}

PyMethodDef fast_call_def = {"fast_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_call_entry)),
                             METH_FASTCALL,
                             "fast_call(plan, args): the result, or NotImplemented (python/fast_call.cpp)"};

}  // namespace

py::object plan_capsule(std::shared_ptr<mlk::rt::CallPlan> plan) {
  auto* held = new std::shared_ptr<mlk::rt::CallPlan>(std::move(plan));
  PyObject* cap = PyCapsule_New(held, kPlanName, [](PyObject* c) {
    delete static_cast<std::shared_ptr<mlk::rt::CallPlan>*>(PyCapsule_GetPointer(c, kPlanName));
  });
  if (!cap) {
    delete held;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

void bind_fast_call(py::module_& m) {
  PyObject* f = PyCFunction_NewEx(&fast_call_def, nullptr, m.ptr());
  if (!f) throw py::error_already_set();
  m.add_object("fast_call", py::reinterpret_steal<py::object>(f));
}
