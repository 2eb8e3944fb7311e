// `mlk serve`: the cache daemon (service/server.h) on a store file.
#include <cstdio>
#include <string>
#include <vector>

#include "cache/paths.h"
#include "cache/sizes.h"
#include "cli/args.h"
#include "cli/command.h"
#include "service/server.h"

namespace mlk::cli {

namespace {

Expected<int64_t> size_flag(const std::string& flag, const std::string& text) {
  auto v = cache::parse_size(text);
  if (!v.ok() || *v <= 0)
    return Status::Usage(flag + ": `" + text + "` is not a size; give bytes or a whole number with K, M or G, e.g. 512M");
  return *v;
}

Expected<int64_t> seconds_flag(const std::string& flag, const std::string& text) { return parse_count(flag, text); }

Status parse_listen(const std::string& text, service::ServeOptions& o) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Status::Usage("--listen: `" + text + "` is not HOST:PORT (e.g. 127.0.0.1:8080, 0.0.0.0:8080; port 0: any free one)");
  std::string port = text.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(port) > 65535) return Status::Usage("--listen: `" + port + "` is not a port number (0-65535)");
  o.host = text.substr(0, colon);
  if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']') o.host = o.host.substr(1, o.host.size() - 2);
  o.port = std::stoi(port);
  return Status::Ok();
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
  const Command& self = command("serve");
  service::ServeOptions o;
  std::string cache_flag;
  ArgReader r(args);
  while (!r.done()) {
    std::string a = r.next();
    if (a == "--access-log") {
      o.access_log = true;
      continue;
    }
    if (!(a == "--cache" || a == "--listen" || a == "--threads" || a == "--max-body" || a == "--quota" ||
          a == "--default-quota" || a == "--timeout" || a == "--keep-alive" || a == "--staged-ttl")) {
      return usage_error(self, a.empty() || a[0] != '-' ? "unexpected argument `" + a + "`" : "unknown option `" + a + "`");
    }
    auto v = r.value();
    if (!v.ok()) return usage_error(self, v.status().message());
    Status s;
    if (a == "--cache") {
      cache_flag = *v;
    } else if (a == "--listen") {
      s = parse_listen(*v, o);
    } else if (a == "--threads") {
      auto n = parse_count(a, *v);
      if (!n.ok() || *n > 1024) return usage_error(self, "--threads: `" + *v + "` is not a number from 1 to 1024");
      o.threads = static_cast<int>(*n);
    } else if (a == "--max-body" || a == "--default-quota") {
      auto n = size_flag(a, *v);
      if (!n.ok()) return usage_error(self, n.status().message());
      (a == "--max-body" ? o.api.max_body_bytes : o.api.quotas.default_limit) = *n;
    } else if (a == "--quota") {
      size_t eq = v->find('=');
      if (eq == std::string::npos || eq == 0) return usage_error(self, "--quota: `" + *v + "` is not TEAM=SIZE (e.g. vision=50G)");
      std::string team = v->substr(0, eq);
      Status ns = cache::validate_namespace(team);
      if (!ns.ok()) return usage_error(self, "--quota: " + ns.message());
      auto n = size_flag("--quota", v->substr(eq + 1));
      if (!n.ok()) return usage_error(self, n.status().message());
      o.api.quotas.limits[team] = *n;
    } else {
      auto n = seconds_flag(a, *v);
      if (!n.ok()) return usage_error(self, n.status().message());
      if (a == "--timeout") o.read_timeout_s = o.write_timeout_s = static_cast<int>(*n);
      if (a == "--keep-alive") o.keep_alive_timeout_s = static_cast<int>(*n);
      if (a == "--staged-ttl") o.api.staged_ttl_s = *n;
    }
    if (!s.ok()) return usage_error(self, s.message());
  }
  o.store_path = cache::default_store_path(cache_flag);
  Status s = service::serve_until_signal(o);
  if (!s.ok()) {
    std::fprintf(stderr, "mlk serve: %s\n", s.message().c_str());
    return s.exit_code();
  }
  return 0;
}

}  // namespace mlk::cli
