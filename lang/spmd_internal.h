// The state of one SPMD lowering (lang/spmd.h), shared by its driver
// (spmd.cpp: values, stages, the result's layout) and its per-op sharding
// rules (spmd_rules.cpp). Internal to lang/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lang/spmd.h"

namespace mlk::spmd {

// One dimension's layout: cut over mesh axis `axis` (-1: whole). A block
// layout gives rank coordinate c the c-th of |axis| equal blocks; `mixed_by`
// is set when the shards are not blocks of the global value (a reshape
// interleaved them): the value still varies over the axis, but concatenating
// its shards does not give the global value.
struct Entry {
  int axis = -1;
  const ir::Node* mixed_by = nullptr;
  bool operator==(const Entry& o) const { return axis == o.axis && mixed_by == o.mixed_by; }
  bool operator!=(const Entry& o) const { return !(*this == o); }
};
using Layout = std::vector<Entry>;

// A value at per-shard shape: its node in the current kernel and its layout.
struct SVal {
  ir::NodeRef local;
  Layout layout;
};

class Lowering {
 public:
  Lowering(const ir::Function& f, const transform::ShardSpec& spec, const std::string& name, bool is_public);
  SpmdResult run();

  // --- for the rules ---
  SVal value(const ir::NodeRef& g);
  // `g`'s value at layout `want`: itself, or a broadcast / constant /
  // elementwise op on them rebuilt at the wanted shape; nullopt otherwise.
  std::optional<ir::NodeRef> conform(const ir::NodeRef& g, const Layout& want);
  // Ends the current kernel at `local` and applies collective `c`; returns the
  // collective's result, a parameter of the next kernel.
  ir::NodeRef collect(const ir::NodeRef& local, ir::Collective::Kind kind, std::vector<int> axes,
                      const std::string& why);
  Shape local_shape(const Shape& global, const Layout& l) const;
  // `g` rebuilt on `operands` at layout `l` (same op and attributes).
  ir::NodeRef rebuild(const ir::NodeRef& g, std::vector<ir::NodeRef> operands, const Layout& l) const;
  SVal fail(const ir::NodeRef& at, DiagKind kind, std::string message);
  bool failed() const { return error_.has_value(); }
  const std::string& axis_name(int k) const { return spec_.mesh[k].name; }
  int64_t axis_size(int k) const { return spec_.mesh[k].size; }
  const Facts& facts() const { return facts_; }

 private:
  SVal param(const ir::NodeRef& g);
  void finish(const SVal& result);

  const ir::Function& f_;
  const transform::ShardSpec& spec_;
  std::string name_;
  bool is_public_;
  Facts facts_;
  std::vector<ir::Param> base_params_;  // at per-shard shapes
  std::vector<ir::Param> collected_;    // results of the collectives so far
  ir::NodeRef last_collected_;
  SpmdResult out_;
  std::optional<SpmdError> error_;
  std::map<const ir::Node*, SVal> memo_;
  std::vector<ir::NodeRef> keep_;  // keeps memo_'s keys alive
};

// The sharding rule of `g`'s op: its value from its operands' (spmd_rules.cpp).
SVal apply_rule(Lowering& lw, const ir::NodeRef& g);

std::string q(const std::string& s);

}  // namespace mlk::spmd
