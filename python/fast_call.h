// mlk._mlk.fast_call and mlk._mlk.CallPlan (python/fast_call.cpp): the hot
// path of a Python call, registered into the module by mlk_module.cpp.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

namespace mlk::rt {
class CallPlan;
}

void bind_fast_call(pybind11::module_& m);
// `plan` as the capsule fast_call takes (it keeps the plan alive).
pybind11::object plan_capsule(std::shared_ptr<mlk::rt::CallPlan> plan);
