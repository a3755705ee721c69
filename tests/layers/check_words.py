#!/usr/bin/env python3
"""Words that went stale: every repository path a comment, a doc or a script names must exist,
and nothing may say "the issue" (the tracker is not part of the repository: say what and why).

Scans the files git tracks (code, build files, scripts, docs) for
  - paths from the top of the repository: src/..., include/..., tests/..., docs/..., bench/...,
    tools/..., scripts/..., examples/..., cmake/..., support/..., python/...;
  - public headers named as pinpool/x.h (include/pinpool/x.h);
  - paths inside src/ named from a room (pool/arrays.h, wire/bytes.h, heap/heap.cc, ...);
  - Markdown links to files (relative to the file that links);
and reports each one that names no file or directory. A path with a placeholder (<room>, *, N)
or one below build/ is not a claim about the tree and is passed over; so are generated records.
Usage: check_words.py ROOT | check_words.py --self-test ROOT
"""
import os
import re
import subprocess
import sys

import plants

TOP = r"(?:src|include|tests|docs|bench|tools|scripts|examples|cmake|support|python|\.ci)"
ROOM_NAMES = ("util", "wire", "os", "domain", "arena", "heap", "report", "pool", "adapters",
              "providers")
ROOMS = "(?:" + "|".join(ROOM_NAMES) + ")"
PATH_CHARS = r"[A-Za-z0-9_./+-]"
TOP_PATH = re.compile(rf"(?<![\w./-]){TOP}/{PATH_CHARS}*")
PUBLIC = re.compile(rf"(?<![\w./-])pinpool/[a-z_]+\.h\b")
ROOM_PATH = re.compile(rf"(?<![\w./-]){ROOMS}/{PATH_CHARS}+\.(?:h|cc)\b")
MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
THE_ISSUE = re.compile(r"\bthe issue\b", re.I)
TEXT_ENDINGS = (".h", ".cc", ".c", ".py", ".sh", ".md", ".txt", ".cmake", ".in", ".json", ".map",
                ".pyi", ".toml", ".cfg", ".supp")
SKIP_PREFIXES = ("tests/abi/layout-", "tests/abi/symbols-", "tests/fuzz/")


def tracked(root):
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if out.returncode == 0 and out.stdout:
        return out.stdout.split()
    files = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", "build")]
        files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
    return files


def placeholder(path):
    return any(c in path for c in "<>*{}$") or "..." in path or re.search(r"_vN|[/_-]N\b", path)


# Made by the build, named as where they land.
GENERATED = {"include/pinpool/version.h", "tools/pinpool-info"}


def exists(root, rel, path):
    """Whether `path`, named in file `rel`, is there: from the top, or from the file's own
    top-level directory or directory (tests name tests/support/x.h as support/x.h), or as a
    program built from a source of that name, or generated."""
    if path in GENERATED:
        return True
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2 and parts[1] not in ROOM_NAMES:
        return True  # another project's src/ (bench/third-party.sh's programs)
    bases = ["", rel.split("/")[0], os.path.dirname(rel)]
    for base in bases:
        for candidate in (path, path + ".cc", path + ".c"):
            if os.path.exists(os.path.join(root, base, candidate)):
                return True
    if parts[0] == "src" and os.path.exists(os.path.join(root, "tests", *parts[1:])):
        return True  # a room-style path of tests/ (providers/device.h)
    return False


def problems_in(root, rel):
    full = os.path.join(root, rel)
    try:
        text = open(full, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        return []
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        if THE_ISSUE.search(line):
            found.append(f"{rel}:{n}: says \"the issue\": say what and why instead")
        claims = []

        def named(m):  # not when a placeholder follows: layout-v<N>.txt, x_*.cc
            return m.end() >= len(line) or line[m.end()] not in "<*{$"

        for m in TOP_PATH.finditer(line):
            if named(m):
                claims.append(m.group(0))
        for m in PUBLIC.finditer(line):
            claims.append("include/" + m.group(0))
        for m in ROOM_PATH.finditer(line):
            if named(m):
                claims.append("src/" + m.group(0))
        if rel.endswith(".md"):
            for m in MD_LINK.finditer(line):
                target = m.group(1)
                if "://" in target or target.startswith("mailto:"):
                    continue
                claims.append(os.path.normpath(os.path.join(os.path.dirname(rel), target)))
        for claim in claims:
            path = re.sub(r"(\.(?:sh|py|md|cc|h))-[-\w]+$", r"\1", claim.rstrip(".,;:)'`\"-"))
            if placeholder(path) or path.startswith("build/") or "/build/" in path:
                continue
            if not exists(root, rel, path):
                found.append(f"{rel}:{n}: names {path}, which does not exist")
    return found


def check(root):
    problems = []
    for rel in tracked(root):
        if not rel.endswith(TEXT_ENDINGS) and os.path.basename(rel) not in (
                "CMakeLists.txt", "run", "README"):
            continue
        # The checks' own self-tests name what does not exist on purpose.
        if rel.startswith(SKIP_PREFIXES) or rel.startswith("tests/layers/") or rel.startswith(
                "tests/abi/check_abi"):
            continue
        problems += problems_in(root, rel)
    return problems


PLANTS = [
    ("docs/design.md", "See docs/nowhere.md for the rest.\n", "names docs/nowhere.md"),
    ("src/pool/pool.cc", "// pool/gone.h keeps it\n", "names src/pool/gone.h"),
    ("src/pool/pool.cc", "// pinpool/gone.h says so\n", "names include/pinpool/gone.h"),
    ("docs/design.md", "[a link](missing.md)\n", "names docs/missing.md"),
    ("README.md", "This fixes the issue.\n", "says \"the issue\""),
]


def self_test(root):
    failures = plants.report_each(root, ("src", "include", "docs"), PLANTS, problems_in,
                                  files=("README.md",))
    print(f"check_words self-test: {len(PLANTS) - failures} of {len(PLANTS)} plants reported")
    return 1 if failures else 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test(argv[2] if len(argv) > 2 else ".")
    root = argv[1] if len(argv) > 1 else "."
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_words: {len(problems)} stale word(s)")
        return 1
    print("check_words: every path named exists, and no file says \"the issue\"")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
