// The declaration a Dataframe parameter (lang/frame.h) makes for the Arrow
// reader (interop/arrow_reader.h): the reader then checks exactly the schema
// the .tl type says. Arrow-free.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "interop/arrow_reader.h"
#include "lang/frame.h"

namespace mlk::arrow_ipc {

// Columns in the frame's order with their dtypes, list sizes (a constant, or
// a dimension the stream binds: list_dim), nullability and rules (a dimension
// bound is resolved by the reader); the row dimension is rows_dim (a constant
// row count is a "dimension" named by its value). `dims` are the values known
// before reading (--dims): a list size or row count that differs is refused.
SchemaDecl schema_of(const ir::Frame& frame, const std::map<std::string, int64_t>& dims);

}  // namespace mlk::arrow_ipc
