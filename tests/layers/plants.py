"""Planting, for the checkers' self-tests (check_layers.py, check_words.py): each plant is a line
added to one file of a copy of the tree, and the checker must report it. Owns nothing outside the
temporary copies it makes."""

import os
import shutil
import tempfile


def report_each(root, dirs, plants, problems_of, prepare=None, files=()):
    """Copies `dirs` and `files` of `root` into a fresh directory per plant (path, line, expect),
    puts `line` at the top of `path` there (creating it when missing), calls prepare(copy, plant)
    when given, and looks for `expect` in problems_of(copy, path). Prints one line per plant;
    returns how many were not reported."""
    failures = 0
    for path, line, expect in plants:
        with tempfile.TemporaryDirectory() as tmp:
            for d in dirs:
                shutil.copytree(os.path.join(root, d), os.path.join(tmp, d),
                                ignore=shutil.ignore_patterns("*corpus*", "*seeds*"))
            for f in files:
                shutil.copy(os.path.join(root, f), os.path.join(tmp, f))
            target = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if prepare is not None:
                prepare(tmp, (path, line, expect))
            old = open(target).read() if os.path.exists(target) else ""
            with open(target, "w") as fh:
                fh.write(line + old)
            hit = [p for p in problems_of(tmp, path) if expect in p]
            if hit:
                print(f"self-test: {path}: {hit[0]}")
            else:
                print(f"self-test: planting {line.strip()} in {path} was not reported "
                      f"(expected \"{expect}\")")
                failures += 1
    return failures
