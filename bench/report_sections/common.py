"""What every section of docs/benchmarks.md shares: reading the results directory (key=value
files, Google Benchmark JSON), formatting figures, and the Page the sections write into (its
lines, its targets, its machine captions, gnuplot figures).

The results directory is read, never written, except for plots/ (gnuplot's data and scripts).
"""
import json
import os
import re
import subprocess
import sys

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
MIB = 1 << 20


def read_kv(path):
    """key=value lines (several per line allowed for hugepages.txt)."""
    kv = {}
    if not os.path.exists(path):
        return kv
    for line in open(path):
        line = line.strip()
        if "=" not in line:
            continue
        if " " in line and line.count("=") > 1 and not line.startswith(("date=", "cpu_model=", "os=", "thp=", "command=", "load=")):
            for part in line.split():
                if "=" in part:
                    k, v = part.split("=", 1)
                    kv[k] = v
        else:
            k, v = line.split("=", 1)
            kv[k] = v
    return kv


class Results:
    """One Google Benchmark JSON file: name -> record (median aggregate, else the single run),
    name -> error message, and the context."""

    def __init__(self, path, aggregate="median"):
        self.runs, self.errors, self.context = {}, {}, {}
        self.medians = {}
        self.present = os.path.exists(path) and os.path.getsize(path) > 0
        if not self.present:
            return
        try:
            data = json.load(open(path))
        except json.JSONDecodeError as e:  # a run cut short
            print(f"report: {path}: {e}: left out", file=sys.stderr)
            self.present = False
            return
        self.context = data.get("context", {})
        for b in data.get("benchmarks", []):
            name = b.get("run_name", b["name"])
            if b.get("error_occurred"):
                self.errors[name] = b.get("error_message", "error")
                continue
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == aggregate:
                    self.runs[name] = b
                if b.get("aggregate_name") == "median":
                    self.medians[name] = b
            elif name not in self.runs:
                self.runs[name] = b

    def ns(self, name):
        b = self.runs.get(name)
        return None if b is None else b["real_time"] * UNIT_NS[b.get("time_unit", "ns")]

    def median_ns(self, name):
        b = self.medians.get(name) or self.runs.get(name)
        return None if b is None else b["real_time"] * UNIT_NS[b.get("time_unit", "ns")]

    def get(self, name, field):
        b = self.runs.get(name)
        return None if b is None else b.get(field)


def fmt_ns(v):
    if v is None:
        return "n/a"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.2f} µs"
    return f"{v:.1f} ns"


def fmt_size(n):
    n = int(n)
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


def fmt_ratio(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}"


def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def read_loads(path):
    """load.txt: one line per part's start and end, `name TIME L1 L5 L15` (TIME as
    2026-11-29T09:30:00Z; older runs wrote `name L1 L5 L15`). name -> (time or None, load1)."""
    loads = {}
    if not os.path.exists(path):
        return loads
    for line in open(path):
        f = line.split()
        if len(f) == 5:
            loads[f[0]] = (f[1], f[2])
        elif len(f) == 4:
            loads[f[0]] = (None, f[1])
    return loads


def anchor(title):
    """The fragment a Markdown renderer (GitHub's) gives a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


class Page:
    """The page being written: its lines, its targets (what, over, result, met, section), the
    run's machine and guest descriptions, what it skipped and why, when each part ran under what
    load, and the helpers every section uses."""

    def __init__(self, args):
        self.args = args
        self.out = args.results
        self.machine = read_kv(os.path.join(self.out, "machine.txt"))
        if "command" in self.machine:  # the command that measured (also when only re-reporting)
            args.command = self.machine["command"]
        self.guest = read_kv(os.path.join(self.out, "guest", "guest.txt"))
        self.hugepages = read_kv(os.path.join(self.out, "hugepages.txt"))
        self.skipped = read_kv(os.path.join(self.out, "skipped.txt"))
        self.loads = read_loads(os.path.join(self.out, "load.txt"))
        self.quick = self.machine.get("quick") == "quick"
        self.lines = []
        self.targets = []  # (what, over, result, ok, section's anchor)
        self.current = ""  # the section being written: its anchor
        self.figures_written = set()
        os.makedirs(args.figures, exist_ok=True)
        self.fig_rel = os.path.relpath(args.figures, os.path.dirname(os.path.abspath(args.markdown)))

    # --- helpers ---------------------------------------------------------------------------
    def w(self, s=""):
        self.lines.append(s)

    def link(self, doc):
        """`, [doc](doc)` when the page's directory holds `doc`, else nothing: a section may
        describe a part whose page this tree does not have yet."""
        here = os.path.dirname(os.path.abspath(self.args.markdown))
        return f" ([{doc}]({doc}))" if os.path.exists(os.path.join(here, doc)) else ""

    def section(self, title):
        """Starts a section: its heading, and the anchor its targets link to."""
        self.current = anchor(title)
        self.w(f"## {title}")
        self.w()

    def target(self, what, over, result, ok):
        """A row of the Targets table: `ok` True (met), False (missed) or None (not measured)."""
        self.targets.append((what, over, result, ok, self.current))

    def measured(self, *parts, guest=False):
        """A line saying when the section's parts ran and under what load (load.txt), for the
        figures below it. `parts` name load.txt's `<part>_start` and `<part>_end` entries; the
        section's span is the first's start to the last's end."""
        start = self.loads.get(parts[0] + "_start")
        end = self.loads.get(parts[-1] + "_end")
        if not start and not end:
            return
        def hhmm(t):
            return t[11:16] if t else "?"
        if start and start[0]:
            a, b = hhmm(start[0]), hhmm(end[0] if end else None)
            when = f"{start[0][:10]} {a}{'-' + b if b != a else ''} UTC"
        else:
            when = self.machine.get("date", "?")
        load = (f"load average (1 min) {start[1] if start else '?'} at the start, "
                f"{end[1] if end else '?'} at the end")
        where = "in the soft-RoCE guest; host " if guest else ""
        self.w(f"*Measured {when}, commit `{self.machine.get('commit', '?')}`, {where}{load}"
               + (" (--quick: not results)" if self.quick else "") + ".*")
        self.w()

    def not_measured(self, why="", target=None, part=None):
        """Says the section was not measured in this run (and why: `why`, else the reason the
        script recorded for `part` in skipped.txt), and records its target, if it has one, as
        not measured. For a section to return after."""
        why = why or self.skipped.get(part or "", "")
        self.w("Not measured in this run" + (f": {why}." if why else "."))
        self.w()
        if target:
            self.target(target, "", "not measured" + (f" ({why})" if why else ""), None)

    def machine_line(self, guest=False):
        m = self.machine
        host = f"{m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs, {m.get('memory_gib', '?')} GiB, {m.get('os', '?')}, Linux {m.get('kernel', '?')}"
        if guest:
            g = self.guest
            return (f"soft-RoCE rxe0 in a QEMU TCG guest ({g.get('cpus', '?')} vCPUs, "
                    f"{int(g.get('memory_kib', '0')) // 1024} MiB, Linux {g.get('kernel', '?')}) on {host}")
        return host

    def caption(self, guest=False, run=None):
        run = run or {}
        return (f"command: {run.get('command', self.args.command)} | machine: {self.machine_line(guest)} | "
                f"date: {run.get('date', self.machine.get('date', '?'))} | "
                f"commit {run.get('commit', self.machine.get('commit', '?'))}")

    def plot(self, name, script, data, guest=False, run=None):
        """Writes DATA files and runs gnuplot SCRIPT producing figures/NAME.png. `run` (command,
        date, commit) names a separate run that measured these figures, when not the page's."""
        work = os.path.abspath(os.path.join(self.out, "plots"))
        os.makedirs(work, exist_ok=True)
        for fname, text in data.items():
            with open(os.path.join(work, fname), "w") as f:
                f.write(text)
        png = os.path.abspath(os.path.join(self.args.figures, name + ".png"))
        self.figures_written.add(name + ".png")
        m = dict(self.machine, **(run or {}))
        line1 = (f"command: {(run or {}).get('command', self.args.command)}   date: {m.get('date', '?')}   "
                 f"commit: {m.get('commit', '?')}").replace('"', "'")
        line2 = f"machine: {self.machine_line(guest)}".replace('"', "'")
        head = (f'set terminal pngcairo noenhanced size 1200,{script.get("height", 700)} font "DejaVu Sans,10"\n'
                f'set output "{png}"\n'
                f'set label 998 "{line1}" at screen 0.01,0.035 font ",8"\n'
                f'set label 999 "{line2}" at screen 0.01,0.012 font ",8"\n')
        gp = os.path.join(work, name + ".gp")
        with open(gp, "w") as f:
            f.write(head + script["body"])
        r = subprocess.run(["gnuplot", gp], cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"report: gnuplot failed for {name}:\n{r.stderr}", file=sys.stderr)
            sys.exit(1)
        self.w(f"![{name}]({self.fig_rel}/{name}.png)")
        self.w()
        self.w(f"<sub>{self.caption(guest, run)}</sub>")
        self.w()

    def remove_stale_figures(self):
        """Figures of an earlier run that this one did not draw (a part it skipped) go, so that
        no figure in the directory is older than the page."""
        for name in os.listdir(self.args.figures):
            if name.endswith(".png") and name not in self.figures_written:
                os.remove(os.path.join(self.args.figures, name))
