// `mlk bench` and the benchmark history of a `mlk serve` (docs/ci.md): push
// a report, fetch a named baseline set. Token from $MLK_TOKEN.
#pragma once

#include <string>

#include "base/status.h"

namespace mlk::client {

// POST /v1/bench/results: `report` (an mlk bench report's JSON) stored on
// `server` (http://HOST:PORT) in namespace `ns` (empty: the token's team),
// and, with `baseline_set`, as that set's entries. Returns the server's
// count of stored kernels; errors name the server and carry its message.
Expected<int> push_bench_report(const std::string& server, const std::string& ns, const std::string& report,
                                const std::string& baseline_set);

// GET /v1/bench/baselines/NAME: the set as an mlk bench report (JSON text).
Expected<std::string> fetch_baseline_set(const std::string& server, const std::string& ns, const std::string& name);

}  // namespace mlk::client
