"""docs/openapi.yaml and the server's route table agree.

`MLK serve --routes` prints the route table of service/api.cpp as a
JSON array of {"prefix", "name", "methods"}: a prefix is an exact path, or,
ending in '/', every path that starts with it. This test fails (exit 1,
naming the path or route) when

  - an operation of the spec (a path and a method) is not routed: the route
    the server would pick for the path (the first whose prefix matches, as
    `dispatch` picks; templates like {sha256} are taken literally) is
    missing or does not allow the method;
  - a route and one of its methods has no operation in the spec: no spec
    path under the prefix (equal to an exact one, starting with one ending
    in '/') with that method.

The dashboard's routes (/ui, /ui/...) are left out of the spec on purpose
and are not checked. On success it prints
"openapi routes: N routes, M operations, ok" (N routes checked, M
operations in the spec).

usage: openapi_routes.py MLK_BINARY OPENAPI_YAML
"""
import json
import subprocess
import sys

import yaml

MLK, SPEC = sys.argv[1], sys.argv[2]
HTTP_METHODS = ("get", "head", "put", "post", "delete", "patch", "options", "trace")


def matches(prefix, path):
    return path.startswith(prefix) if prefix.endswith("/") else path == prefix


def is_dashboard(prefix):
    return prefix == "/ui" or prefix.startswith("/ui/")


p = subprocess.run([MLK, "serve", "--routes"], capture_output=True, text=True, timeout=60)
if p.returncode != 0:
    sys.exit(f"openapi routes: `mlk serve --routes` exited {p.returncode}: {p.stderr.strip()[-500:]}")
routes = json.loads(p.stdout)
with open(SPEC, encoding="utf-8") as f:
    spec = yaml.safe_load(f)
operations = [(path, m.upper()) for path, item in spec["paths"].items() for m in item if m in HTTP_METHODS]

failures = []
for path, method in operations:
    route = next((r for r in routes if matches(r["prefix"], path)), None)
    if route is None:
        failures.append(f"spec {method} {path}: no route of the server matches the path")
    elif method not in route["methods"]:
        failures.append(f"spec {method} {path}: route {route['prefix']} ({route['name']}) allows only "
                        f"{', '.join(route['methods'])}")

checked = [r for r in routes if not is_dashboard(r["prefix"])]
for r in checked:
    for method in r["methods"]:
        if not any(m == method and matches(r["prefix"], path) for path, m in operations):
            failures.append(f"route {method} {r['prefix']} ({r['name']}): no operation in {SPEC}")

if failures:
    print("\n".join(f"openapi routes: {f}" for f in failures))
    sys.exit(1)
print(f"openapi routes: {len(checked)} routes, {len(operations)} operations, ok")
