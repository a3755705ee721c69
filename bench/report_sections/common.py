"""What every section of docs/benchmarks.md shares: reading the results directory (key=value
files, Google Benchmark JSON), formatting figures, and the Page the sections write into (its
lines, its targets, its machine captions, gnuplot figures).

The results directory is read, never written, except for plots/ (gnuplot's data and scripts).
"""
import json
import os
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


class Page:
    """The page being written: its lines, its targets (what, over, result, met), the run's
    machine and guest descriptions, and the helpers every section uses."""

    def __init__(self, args):
        self.args = args
        self.out = args.results
        self.machine = read_kv(os.path.join(self.out, "machine.txt"))
        if "command" in self.machine:  # the command that measured (also when only re-reporting)
            args.command = self.machine["command"]
        self.guest = read_kv(os.path.join(self.out, "guest", "guest.txt"))
        self.hugepages = read_kv(os.path.join(self.out, "hugepages.txt"))
        self.lines = []
        self.targets = []  # (what, target, result, ok)
        os.makedirs(args.figures, exist_ok=True)
        self.fig_rel = os.path.relpath(args.figures, os.path.dirname(os.path.abspath(args.markdown)))

    # --- helpers ---------------------------------------------------------------------------
    def w(self, s=""):
        self.lines.append(s)

    def not_measured(self, why="", target=None):
        """Says the section was not measured in this run (and why), and records its target, if
        it has one, as not measured. For a section to return after."""
        self.w("Not measured in this run" + (f" ({why})." if why else "."))
        self.w()
        if target:
            self.targets.append((target, "", "not measured", None))

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
