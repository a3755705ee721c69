#!/usr/bin/env python3
"""The include graph of src/ and include/pinpool/ against the rooms of src/README.md.

Every directory of src/ is a room, and ROOMS below says which rooms each one may include (besides
itself and the public headers in include/pinpool/). Checks, over every quoted #include:
  - a room includes only the rooms it may use; the table itself has no circle, so it is an order
    and nothing includes back up;
  - the public headers (include/pinpool/) include no src/ header;
  - no cycle among src/ files (an include loop inside a room is a circle too);
  - every directory of src/ that holds code is a room of the table (a new one must be placed);
  - every directory of tests/ is a room (its tests) or one of the kinds in TEST_KINDS, so the
    tests mirror src/.
Prints each violation as `file: includes "x": why` and exits 1 if there is any; 0 with a
one-line summary otherwise.

Usage: check_layers.py ROOT          check the tree at ROOT
       check_layers.py --self-test ROOT
                                     plant one violation of each kind in a copy of ROOT's src/ and
                                     include/ and check that each is reported (exits 1 if one is not)
"""
import os
import re
import sys

import plants

# Room -> the rooms it may include. Lower rooms come first; the order is checked (no circle).
ROOMS = {
    "util": set(),                                    # checks, bytes, mutex, latency
    "wire": {"util"},                                 # pure encoders and decoders of bytes
    "os": {"util", "wire"},                           # the kernel: maps, files, limits
    "domain": {"util", "os"},                         # registration backends
    "arena": {"util", "os", "domain"},                # the chunks
    "heap": {"util", "os", "arena"},                  # sub-allocation
    "report": {"util", "wire", "os"},                 # public PoolStats in, bytes out
    "pool/grants": {"util", "os", "arena", "heap"},   # which blocks peers reach
    "pool/sharing": {"util", "wire", "os", "arena"},  # what crosses to other processes
    "pool": {"util", "wire", "os", "domain", "arena", "heap", "report", "pool/grants",
             "pool/sharing"},                         # the object and its parts
    "adapters": {"util"},                             # C API, pmr: public headers only
    "providers/verbs": {"util", "os", "domain"},      # the pool through public headers only
    "providers/io_uring": {"util", "os", "domain"},   # the same; neither core provider the other
    "providers/ucx": set(),                           # public headers only
    "providers/fabric": set(),                        # public headers only
}
# Directories of tests/ that group tests by kind rather than mirror a room (tests/README.md).
TEST_KINDS = {"api", "abi", "layers", "softroce", "linking", "consumer", "c_program", "info", "fuzz",
              "support", "providers", "soak"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(path):
    """The room of a path relative to src/ ("pool/sharing/x.h" -> "pool/sharing"), or None."""
    for name in sorted(ROOMS, key=len, reverse=True):
        if path.startswith(name + "/"):
            rest = path[len(name) + 1:]
            if "/" in rest:
                return None  # a directory below a room that is no room itself
            return name
    return None


def table_problems():
    """Circles in ROOMS itself (then no order exists)."""
    problems = []
    for room, uses in ROOMS.items():
        for used in uses:
            if used not in ROOMS:
                problems.append(f"ROOMS: {room} uses {used}, which is no room")
    state = {}

    def visit(room, stack):
        state[room] = 1
        for used in sorted(ROOMS.get(room, ())):
            if state.get(used) == 1:
                problems.append("ROOMS: circle " + " -> ".join(stack[stack.index(used):] + [used]))
            elif state.get(used) is None:
                visit(used, stack + [used])
        state[room] = 2

    for room in ROOMS:
        if state.get(room) is None:
            visit(room, [room])
    return problems


def check(root):
    """The violations in the tree at `root`, and a summary."""
    src = os.path.join(root, "src")
    problems = table_problems()
    graph = {}
    for dirpath, _, files in os.walk(src):
        code = [f for f in files if f.endswith((".h", ".cc"))]
        rel_dir = os.path.relpath(dirpath, src)
        if code and rel_dir not in ROOMS:
            problems.append(f"src/{rel_dir}/: not a room of check_layers.py's ROOMS (place it)")
        for f in code:
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                includes = INCLUDE.findall(fh.read())
            mine = room_of(rel)
            graph[rel] = []
            for inc in includes:
                if inc.startswith("pinpool/") or not os.path.exists(os.path.join(src, inc)):
                    continue  # public headers, Abseil, generated headers
                graph[rel].append(inc)
                theirs = room_of(inc)
                if mine is None or theirs is None:
                    problems.append(f"src/{rel}: includes \"{inc}\": outside every room")
                elif theirs != mine and theirs not in ROOMS[mine]:
                    allowed = ", ".join(sorted(ROOMS[mine])) or "public headers only"
                    problems.append(f"src/{rel}: includes \"{inc}\": {mine}/ may use {allowed}")
    public = os.path.join(root, "include", "pinpool")
    for f in sorted(os.listdir(public)):
        with open(os.path.join(public, f), encoding="utf-8") as fh:
            for inc in INCLUDE.findall(fh.read()):
                if os.path.exists(os.path.join(src, inc)):
                    problems.append(f"include/pinpool/{f}: includes \"{inc}\": a public header "
                                    "includes no internal one")
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
    tests = os.path.join(root, "tests")
    for dirpath, dirs, _ in os.walk(tests):
        rel = os.path.relpath(dirpath, tests)
        if rel == ".":
            continue
        top = rel.split("/")[0]
        if top in TEST_KINDS - {"providers"}:
            dirs.clear()  # a kind's own layout
            continue
        if rel not in ROOMS and rel not in TEST_KINDS:
            problems.append(f"tests/{rel}/: neither a room of src/ nor a kind of test "
                            "(check_layers.py's TEST_KINDS)")
    edges = sum(len(v) for v in graph.values())
    return problems, f"{len(graph)} files in {len(ROOMS)} rooms, {edges} internal includes"


# Each plant: (file to change, relative to the copy's root, line to add, what the report must say).
PLANTS = [
    ("src/report/stats_text.cc", '#include "pool/arrays.h"\n', "report/ may use"),
    ("src/wire/descriptor.cc", '#include "os/os.h"\n', "wire/ may use"),
    ("src/adapters/c_api.cc", '#include "heap/heap.h"\n', "adapters/ may use"),
    ("src/pool/sharing/transfer.cc", '#include "pool/classes.h"\n', "pool/sharing/ may use"),
    ("src/pool/grants/registry.cc", '#include "pool/sharing/sharing.h"\n', "pool/grants/ may use"),
    ("src/providers/verbs/domain.cc", '#include "pool/arrays.h"\n', "providers/verbs/ may use"),
    ("src/arena/arena.h", '#include "arena/trim_cycle.h"\n', "include cycle"),
    ("include/pinpool/block.h", '#include "util/check.h"\n', "a public header includes"),
    ("src/pool/stray/x.cc", '#include "util/check.h"\n', "not a room"),
    ("tests/pools/x_test.cc", "// a directory that mirrors nothing\n", "neither a room"),
]


def self_test(root):
    def prepare(tmp, plant):
        if plant[2] == "include cycle":
            # A header that includes the one including it.
            with open(os.path.join(tmp, "src/arena/trim_cycle.h"), "w") as fh:
                fh.write('#include "arena/arena.h"\n')

    failures = plants.report_each(root, ("src", "include", "tests"), PLANTS,
                                  lambda tmp, _path: check(tmp)[0], prepare)
    # A room that may use one above it: the table is no order any more.
    ROOMS["util"].add("pool")
    circle = [p for p in table_problems() if "circle" in p]
    ROOMS["util"].discard("pool")
    if circle:
        print(f"self-test: util may use pool: {circle[0]}")
    else:
        print("self-test: a circle in ROOMS (util may use pool) was not reported")
        failures += 1
    clean, _ = check(root)
    if clean:
        print("self-test: the tree itself has violations; fix them first")
        failures += 1
    print(f"check_layers self-test: {len(PLANTS) + 1 - failures} of {len(PLANTS) + 1} plants "
          "reported")
    return 1 if failures else 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test(argv[2] if len(argv) > 2 else ".")
    problems, summary = check(argv[1] if len(argv) > 1 else ".")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} violation(s)")
        return 1
    print(f"check_layers: {summary}; rooms hold, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
