#!/usr/bin/env python3
"""pinpool's ABI check (docs/abi.md): what programs compile in, and what the libraries export,
against the record of the current ABI version (include/pinpool/abi.h).

Layouts: abi_types.cc (every public header) is compiled with full debug information and gdb
prints every type of pinpool::abi_v<N> and of the C API (`ptype /omt`: offsets and sizes of
every member, nested ones included; enumerators), and the virtual functions of every class that
has them, in order: their slots. Classes programs only hold by pointer or reference (OPAQUE)
are recorded by their virtual functions alone; of Pool, only the head the inline paths read.
Symbols: every symbol the given libraries export, demangled, with its version node.

The record is tests/abi/layout-v<N>.txt and symbols-v<N>.txt. The check fails
  - when a layout differs from the record (a member moved, resized, added or removed; an
    enumerator changed; a virtual function added, removed or moved), except that PoolStats may
    grow at its end (its members so far keep their places);
  - when an exported symbol of the record is gone or changed version (an added one is fine);
  - when there is no record for the version abi.h names (a bump records anew: --record).
So a layout that changes without a bump fails, and a bump makes its own record.

Usage:
  check_abi.py --root ROOT --cxx CXX --include DIR... [--lib LIB...]           check
  check_abi.py ... --record                                                    write the record
  check_abi.py ... --self-test                                                 plant changes in a
      copy of the headers and check that each is caught (and that PoolStats may grow)
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Held by pointer or reference only: made and owned by the library, so their data layout is not
# compiled into programs (their virtual functions are).
OPAQUE = {"Pool", "Attachment", "VerbsDomain", "IoUringDomain", "UcxDomain", "FabricDomain",
          "VerbsRemoteAccess", "FabricRemoteAccess"}
# May grow at its end within a version (pinpool/stats.h).
GROWABLE = {"PoolStats"}


def abi_version(include):
    text = open(os.path.join(include, "pinpool", "abi.h")).read()
    return int(re.search(r"^#define PINPOOL_ABI_VERSION (\d+)$", text, re.M).group(1))


def unlisted_headers(root):
    """Public headers abi_types.cc does not include: their types would go unchecked."""
    text = open(os.path.join(root, "tests", "abi", "abi_types.cc")).read()
    return [h for h in sorted(os.listdir(os.path.join(root, "include", "pinpool")))
            if h.endswith(".h") and f'#include "pinpool/{h}"' not in text]


def compile_types(root, cxx, includes, out):
    defines = []
    if subprocess.run(["pkg-config", "--exists", "ucx"]).returncode == 0:
        defines.append("-DPINPOOL_ABI_UCX")
    if subprocess.run(["pkg-config", "--exists", "libfabric"]).returncode == 0:
        defines.append("-DPINPOOL_ABI_FABRIC")
    cmd = [cxx, "-std=c++20", "-g", "-fno-eliminate-unused-debug-types",
           "-femit-class-debug-always", "-c",
           os.path.join(root, "tests", "abi", "abi_types.cc"), "-o", out] + defines
    for d in includes:
        cmd += ["-I", d]
    for flags in (["pkg-config", "--cflags", "ucx"], ["pkg-config", "--cflags", "libfabric"]):
        r = subprocess.run(flags, capture_output=True, text=True)
        if r.returncode == 0:
            cmd += r.stdout.split()
    subprocess.run(cmd, check=True)


def gdb(obj, commands):
    args = ["gdb", "-nx", "-batch"]
    for c in commands:
        args += ["-ex", c]
    args.append(obj)
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def layouts(obj, version):
    """{type: [lines]}: what programs compile in, as gdb prints it."""
    ns = f"pinpool::abi_v{version}::"
    listing = gdb(obj, [f"info types ^{ns}", "info types ^pinpool_"])
    names = set()
    for line in listing.splitlines():
        m = re.match(r"^\d+:\s+(?:typedef .* )?((?:pinpool::abi_v\d+::|pinpool_)[\w:]+);$",
                     line.strip())
        if m and not m.group(1).endswith("_t"):
            names.add(m.group(1))
    names = sorted(names)
    out = gdb(obj, [f"ptype /omt '{n}'" for n in names] + [f"ptype /t '{n}'" for n in names])
    blocks = re.split(r"(?m)^(?=(?:/\* offset      \|    size \*/  )?type = )", out)
    blocks = [b for b in blocks if b.strip()]
    if len(blocks) != 2 * len(names):
        raise SystemExit(f"check_abi: gdb printed {len(blocks)} types for {2 * len(names)} asks")
    result = {}
    for i, name in enumerate(names):
        short = name.split("::")[-1]
        data = [l.rstrip() for l in blocks[i].splitlines() if l.strip()]
        virtuals = [l.strip() for l in blocks[len(names) + i].splitlines() if "virtual " in l]
        if short == "Pool":
            data = [l for l in data if "head_;" in l or "struct pinpool" in l and "PoolHead" in l]
        elif short in OPAQUE:
            data = []
        if data or virtuals:
            result[name.replace(f"abi_v{version}", "abi_vN")] = (
                data + ["virtuals:"] + virtuals if virtuals else data)
    return result


def render_layouts(lay):
    out = []
    for name in sorted(lay):
        out.append(f"== {name}")
        out += lay[name]
    return "\n".join(out) + "\n"


def parse_layouts(text):
    lay, cur = {}, None
    for line in text.splitlines():
        if line.startswith("== "):
            cur = line[3:]
            lay[cur] = []
        elif cur is not None:
            lay[cur].append(line)
    return lay


def member_lines(lines):
    """The member lines of a ptype /o block: '/* offset | size */ ... name;'."""
    return [l for l in lines if re.match(r"^/\*\s+\d+", l)]


def compare_layouts(recorded, now):
    problems = []
    for name in sorted(set(recorded) | set(now)):
        if name not in now:
            problems.append(f"{name}: gone")
        elif name not in recorded:
            problems.append(f"{name}: new")
        elif recorded[name] != now[name]:
            short = name.split("::")[-1]
            if short in GROWABLE:
                old, new = member_lines(recorded[name]), member_lines(now[name])
                if new[:len(old)] == old and "virtuals:" not in now[name]:
                    continue  # grew at its end
            diff = [f"    - {l}" for l in recorded[name] if l not in now[name]][:4]
            diff += [f"    + {l}" for l in now[name] if l not in recorded[name]][:4]
            problems.append(f"{name}: changed\n" + "\n".join(diff))
    return problems


def symbols(libs):
    lines = []
    for lib in libs:
        out = subprocess.run(["readelf", "--dyn-syms", "-W", lib], capture_output=True, text=True,
                             check=True).stdout
        names = []
        for row in out.splitlines():
            f = row.split()
            if len(f) >= 8 and f[6] != "UND" and f[4] != "LOCAL" and "@" in f[7]:
                names.append(f[7])
        demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                                   text=True, check=True).stdout.splitlines()
        base = re.sub(r"\.so.*$", ".so", os.path.basename(lib))
        lines += sorted(f"{base} {d}" for d in demangled)
    return lines


def check(args, include_dirs, record_dir, quiet=False):
    version = abi_version(include_dirs[0])
    problems = [f"include/pinpool/{h} is not in tests/abi/abi_types.cc: its types go unchecked"
                for h in unlisted_headers(args.root)]
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "abi_types.o")
        compile_types(args.root, args.cxx, include_dirs, obj)
        lay = layouts(obj, version)
    syms = symbols(args.lib) if args.lib else None
    layout_file = os.path.join(record_dir, f"layout-v{version}.txt")
    symbol_file = os.path.join(record_dir, f"symbols-v{version}.txt")
    if args.record:
        with open(layout_file, "w") as fh:
            fh.write(render_layouts(lay))
        if syms is not None:
            with open(symbol_file, "w") as fh:
                fh.write("\n".join(syms) + "\n")
        print(f"check_abi: recorded ABI {version}: {len(lay)} types"
              + (f", {len(syms)} symbols" if syms is not None else ""))
        return []
    if not os.path.exists(layout_file):
        return [f"no record for ABI version {version} (include/pinpool/abi.h): a bump records "
                f"the new layouts: check_abi.py ... --record (docs/abi.md)"]
    problems += [f"layout of {p}" for p in
                 compare_layouts(parse_layouts(open(layout_file).read()), lay)]
    if syms is not None and os.path.exists(symbol_file):
        recorded = set(open(symbol_file).read().splitlines())
        gone = sorted(recorded - set(syms))
        problems += [f"symbol gone or moved to another version node: {s}" for s in gone]
        added = sorted(set(syms) - recorded)
        if added and not quiet:
            print(f"check_abi: {len(added)} exported symbols added since the record (fine; "
                  f"--record keeps them): " + "; ".join(added[:5]))
    if problems and not quiet:
        for p in problems:
            print(f"check_abi: {p}")
        print(f"check_abi: {len(problems)} change(s) to ABI {version} without a bump: bump "
              "PINPOOL_ABI_VERSION in include/pinpool/abi.h and record the new version "
              "(check_abi.py --record; docs/abi.md)")
    elif not quiet:
        print(f"check_abi: ABI {version} holds: {len(lay)} types"
              + (f", {len(syms)} exported symbols" if syms is not None else ""))
    return problems


# Each plant: (header, text to find, text to put instead, whether the check must fail).
PLANTS = [
    ("fast_path.h", "std::uint64_t secret = 0;",
     "std::uint64_t secret = 0;\n  std::uint64_t planted = 0;", True),
    ("block.h", "  std::size_t size_ = 0;", "  std::uint32_t size_ = 0;", True),
    ("domain.h", "  virtual std::string name() const = 0;",
     "  virtual std::string name() const = 0;\n  virtual int planted() const { return 0; }", True),
    # A member function is no layout: it passes.
    ("block.h", "  std::size_t size_ = 0;",
     "  std::size_t size_ = 0;\n\n public:\n  bool planted() const { return true; }", False),
    ("stats.h", "  SharingStats sharing;\n", "  SharingStats sharing;\n  int planted_at_end = 0;\n",
     False),
    ("stats.h", "  std::uint32_t struct_size = sizeof(PoolStats);\n",
     "  std::uint32_t struct_size = sizeof(PoolStats);\n  double planted_between = 0;\n", True),
]


def self_test(args, include_dirs):
    failures = 0
    for header, old, new, must_fail in PLANTS:
        with tempfile.TemporaryDirectory() as tmp:
            inc = os.path.join(tmp, "include")
            shutil.copytree(include_dirs[0], inc)
            path = os.path.join(inc, "pinpool", header)
            text = open(path).read()
            if old not in text:
                print(f"self-test: {header}: the text to plant over is gone: {old.strip()}")
                failures += 1
                continue
            open(path, "w").write(text.replace(old, new, 1))
            a = argparse.Namespace(**{**vars(args), "lib": [], "record": False})
            problems = check(a, [inc] + include_dirs[1:], args.record_dir, quiet=True)
            caught = bool(problems)
            verdict = "caught" if caught else "passes"
            print(f"self-test: {header}: {new.strip().splitlines()[-1].strip()}: {verdict}"
                  + (f" ({problems[0].splitlines()[0]})" if problems else ""))
            if caught != must_fail:
                failures += 1
                print(f"self-test: FAILED: expected it to {'fail' if must_fail else 'pass'}")
    # A bump without its record fails, whatever the layouts.
    with tempfile.TemporaryDirectory() as tmp:
        inc = os.path.join(tmp, "include")
        shutil.copytree(include_dirs[0], inc)
        path = os.path.join(inc, "pinpool", "abi.h")
        v = abi_version(include_dirs[0])
        text = open(path).read().replace(f"#define PINPOOL_ABI_VERSION {v}\n",
                                         f"#define PINPOOL_ABI_VERSION {v + 1}\n")
        open(path, "w").write(text)
        a = argparse.Namespace(**{**vars(args), "lib": [], "record": False})
        problems = check(a, [inc] + include_dirs[1:], args.record_dir, quiet=True)
        print(f"self-test: a bump to {v + 1} without a record: "
              + (problems[0] if problems else "passes"))
        failures += 0 if problems and "no record" in problems[0] else 1
    print(f"check_abi self-test: {len(PLANTS) + 1 - failures} of {len(PLANTS) + 1} as expected")
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--cxx", default="c++")
    p.add_argument("--include", action="append", required=True)
    p.add_argument("--lib", action="append", default=[])
    p.add_argument("--record", action="store_true")
    p.add_argument("--self-test", action="store_true")
    args = p.parse_args()
    args.record_dir = os.path.join(args.root, "tests", "abi")
    if args.self_test:
        return self_test(args, args.include)
    return 1 if check(args, args.include, args.record_dir) else 0


if __name__ == "__main__":
    sys.exit(main())
