// The dashboard of `mlk serve` (service/dashboard.cpp): its route, called by
// the Api's dispatch for /ui and /ui/..., and the pieces its pages share
// (service/dashboard_pages.cpp). Internal to service/.
#pragma once

#include <string>

#include "service/api_internal.h"

namespace mlk::service::detail {

// /ui, /ui/kernel, /ui/login, /ui/logout; `arg` is the path below "/ui/"
// ("" for /ui itself).
ApiResponse dashboard_route(Ctx& c, const std::string& arg);

// An HTML response with the dashboard's headers (a Content-Security-Policy
// that allows no script and no external asset, no-store, nosniff).
ApiResponse html_response(int status, std::string body);
// A rejection as an HTML error page: counted under `reason` like reject().
ApiResponse reject_html(Ctx& c, int status, const std::string& reason, const std::string& message);

// The pages, for a request whose token authorize() accepted (c.token, c.ns
// and c.lease set).
ApiResponse index_page(Ctx& c);
ApiResponse kernel_page(Ctx& c);

}  // namespace mlk::service::detail
