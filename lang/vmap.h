// vmap as a typed program transformation: the body of a function mapped over
// a new batch axis (lang/transforms.h derives its signature).
#pragma once

#include <optional>
#include <vector>

#include "lang/ir.h"

namespace mlk {

// The body of `vmap(f)`, for `f`'s call-free `body`. `in_axes[i]` is the axis
// of the batch in parameter i of the new function (nullopt: not mapped);
// `params` are the new function's parameters; `out_axis` is where the batch
// axis goes in the result, of extent `batch`.
ir::NodeRef vmap_body(const ir::NodeRef& body, const std::vector<ir::Param>& params,
                      const std::vector<std::optional<int64_t>>& in_axes, int64_t out_axis, const Dim& batch);

}  // namespace mlk
