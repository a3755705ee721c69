#!/usr/bin/env python3
"""The include graph of src/ and include/pinpool/ against the layer order of src/README.md.

Checks, over every quoted #include:
  - a layer includes only itself and the layers below it: util < os < domain < arena < heap <
    pool < providers/verbs < providers/io_uring (the verbs and io_uring providers are in the
    core, above the pool, and use the pool only through public headers: never arena/, heap/ or
    pool/; neither includes the other);
  - the UCX and libfabric providers (src/providers/ucx, src/providers/fabric) include no src/
    header at all: public headers only, as any domain writer's library would;
  - the public headers (include/pinpool/) include no src/ header;
  - no cycle among src/ files (an include loop inside a layer is a circle too).
Prints each violation as `file: includes "x": why` and exits 1 if there is any; 0 with a
one-line summary otherwise. Usage: check_layers.py <repository root>.
"""
import os
import re
import sys

ORDER = ["util", "os", "domain", "arena", "heap", "pool", "providers/verbs", "providers/io_uring"]
# What each provider in the core may use of the layers below it: the pool only through its
# public headers.
PROVIDER_MAY_USE = {
    "providers/verbs": {"util", "os", "domain", "providers/verbs"},
    "providers/io_uring": {"util", "os", "domain", "providers/io_uring"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """The layer of a path relative to src/ ("pool/pool.cc" -> "pool"), or None."""
    for name in sorted(ORDER, key=len, reverse=True):
        if path == name or path.startswith(name + "/"):
            return name
    if path.startswith("providers/"):
        return "providers/" + path.split("/")[1]
    return None


def main(root):
    src = os.path.join(root, "src")
    problems = []
    graph = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith((".h", ".cc")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                includes = INCLUDE.findall(fh.read())
            mine = layer_of(rel)
            graph[rel] = []
            for inc in includes:
                if inc.startswith("pinpool/") or not os.path.exists(os.path.join(src, inc)):
                    continue  # public headers, Abseil, generated headers
                graph[rel].append(inc)
                theirs = layer_of(inc)
                if mine is None or theirs is None:
                    problems.append(f"src/{rel}: includes \"{inc}\": outside every layer")
                elif mine in ("providers/ucx", "providers/fabric"):
                    problems.append(f"src/{rel}: includes \"{inc}\": an engine provider uses "
                                    "public headers only")
                elif mine in PROVIDER_MAY_USE and theirs not in PROVIDER_MAY_USE[mine]:
                    problems.append(f"src/{rel}: includes \"{inc}\": {mine} uses "
                                    f"{theirs}/ only through public headers")
                elif ORDER.index(theirs) > ORDER.index(mine):
                    problems.append(f"src/{rel}: includes \"{inc}\": {mine} is below {theirs}")
    public = os.path.join(root, "include", "pinpool")
    for f in sorted(os.listdir(public)):
        with open(os.path.join(public, f), encoding="utf-8") as fh:
            for inc in INCLUDE.findall(fh.read()):
                if os.path.exists(os.path.join(src, inc)):
                    problems.append(f"include/pinpool/{f}: includes \"{inc}\": a public header "
                                    "includes no internal one")
    # Cycles: depth-first search with colours.
    state = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                loop = stack[stack.index(nxt):] + [nxt]
                problems.append("src/: include cycle " + " -> ".join(loop))
            elif state.get(nxt) is None:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if state.get(node) is None:
            visit(node, [node])
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} violation(s)")
        return 1
    edges = sum(len(v) for v in graph.values())
    print(f"check_layers: {len(graph)} files, {edges} internal includes, layers hold, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
