#!/usr/bin/env python3
"""docs/performance.md and its SVG charts, written from the numbers in bench/RESULTS.md.

bench/RESULTS.md is the lab notebook: every run, its machine, its command and what it showed.
This script picks the headline comparisons out of its tables (each number is looked up by
section heading, table row and column, so a number is never copied by hand) and writes the
page people look at, with one chart per comparison. Python's standard library only; nothing
is fetched.

    python3 bench/charts.py          # rewrite docs/performance.md and docs/performance/*.svg
    python3 bench/charts.py --check  # exit 1 if they differ from what RESULTS.md gives

tests/docs.rs runs the check, so the page cannot drift from the notebook. After a new run,
point a figure below at its new section (heading, row, column) and run the script.
"""

import os
import re
import sys
from xml.sax.saxutils import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "RESULTS.md")
PAGE = os.path.join(ROOT, "docs", "performance.md")
CHART_DIR = os.path.join(ROOT, "docs", "performance")


class Notebook:
    """bench/RESULTS.md, read as sections of Markdown tables."""

    def __init__(self, text):
        self.lines = text.splitlines()

    def section(self, heading):
        """The lines of the section whose heading starts with `heading`, up to the next heading
        of the same or a higher level."""
        for i, line in enumerate(self.lines):
            m = re.match(r"^(#+) (.*)$", line)
            if m and m.group(2).startswith(heading):
                level = len(m.group(1))
                out = []
                for later in self.lines[i + 1:]:
                    n = re.match(r"^(#+) ", later)
                    if n and len(n.group(1)) <= level:
                        break
                    out.append(later)
                return out
        raise LookupError(f"bench/RESULTS.md has no section starting {heading!r}")

    def cell(self, heading, row, column):
        """The text of table cell `column` (0: the row's label) of the first row whose label
        starts with `row`, in the section `heading`."""
        for line in self.section(heading):
            if not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells and cells[0].startswith(row):
                if column >= len(cells):
                    raise LookupError(f"{heading!r} / {row!r}: no column {column}")
                return cells[column]
        raise LookupError(f"bench/RESULTS.md, {heading!r}: no table row starting {row!r}")


def number(text, after=None, index=0):
    """The `index`-th number in `text` (after the first `after`, when given): `123,534`,
    `0.593`, `1.37` of `1.37×`."""
    where = text
    if after is not None:
        at = text.find(after)
        if at < 0:
            raise LookupError(f"{after!r} is not in {text!r}")
        where = text[at + len(after):]
    found = re.findall(r"\d[\d,]*(?:\.\d+)?", where)
    if index >= len(found):
        raise LookupError(f"no number {index} in {where!r}")
    return float(found[index].replace(",", ""))


class Figure:
    """One number of the notebook: where it is, and how it is read."""

    def __init__(self, heading, row, column, after=None, index=0):
        self.heading, self.row, self.column = heading, row, column
        self.after, self.index = after, index

    def read(self, notebook):
        text = notebook.cell(self.heading, self.row, self.column)
        return number(text, self.after, self.index)


# Sections of bench/RESULTS.md the figures come from.
EIGHT = "The eight workloads at 125e9cf"
TLS = "2026-11-24: TLS against nginx, and the cleartext hit path after TLS"
H2 = "2026-11-24 (evening): HTTP/2 hits"
BIG = "2026-11-25: the 21 MB hit side by side in bench/run.sh"
DISK = "Disk tier vs nginx `proxy_cache`, 310,000 objects"
FLEET = "2026-11-24: a fleet on Redis Cluster"

# Each comparison: its chart, the series (name, figure) per group, the unit, the command that
# reproduces it, and what the numbers say. `better` is "higher" or "lower".
COMPARISONS = [
    {
        "id": "hits",
        "title": "Cache hits over HTTP/1.1, one core",
        "unit": "requests/s",
        "better": "higher",
        "groups": [
            ("6.3 KB object, 50 connections", [
                ("Shellac", Figure(EIGHT, "1 hit6k", 1)),
                ("nginx proxy_cache", Figure(EIGHT, "1 hit6k", 2)),
                ("Varnish", Figure(EIGHT, "1 hit6k", 3)),
                ("bare server from memory", Figure(EIGHT, "1 hit6k", 4)),
            ]),
            ("100 B object, 200 connections", [
                ("Shellac", Figure(EIGHT, "2 small100", 1)),
                ("nginx proxy_cache", Figure(EIGHT, "2 small100", 2)),
                ("Varnish", Figure(EIGHT, "2 small100", 3)),
                ("bare server from memory", Figure(EIGHT, "2 small100", 4)),
            ]),
        ],
        "command": "cargo build --release --bins --examples && RUNS=3 DURATION=10 bench/run.sh",
        "section": EIGHT,
        "notes": "Each proxy alone on CPU 0 (one worker), wrk and the origin on CPU 1, "
                 "medians of three 10-second runs. The bare server (bench/reference.rs) "
                 "answers from memory and caches nothing: the ceiling for a hit on this "
                 "core.",
    },
    {
        "id": "tls",
        "title": "Cache hits over TLS 1.3 (ECDSA P-256), keep-alive, 50 connections",
        "unit": "requests/s",
        "better": "higher",
        "groups": [
            ("6.3 KB object", [
                ("Shellac", Figure(TLS, "keep-alive hit", 1)),
                ("nginx", Figure(TLS, "keep-alive hit", 2)),
            ]),
        ],
        "command": "RUNS=3 SECS=8 CONNS=50 IDLE=2000 bench/tls.sh",
        "section": TLS,
        "notes": "Medians of three runs on a busy machine (load average 7–9); the runs "
                 "varied by up to 40 %.",
    },
    {
        "id": "tls-cpu",
        "title": "Server CPU per TLS handshake (with its request)",
        "unit": "µs of CPU",
        "better": "lower",
        "groups": [
            ("full handshake", [
                ("Shellac", Figure(TLS, "same: server CPU per handshake", 1)),
                ("nginx", Figure(TLS, "same: server CPU per handshake", 2)),
            ]),
            ("resumed session", [
                ("Shellac", Figure(TLS, "same: server CPU per resumed", 1)),
                ("nginx", Figure(TLS, "same: server CPU per resumed", 2)),
            ]),
        ],
        "command": "RUNS=3 SECS=8 CONNS=50 IDLE=2000 bench/tls.sh",
        "section": TLS,
        "notes": "Handshakes per second are the client's limit on two cores (it verifies a "
                 "signature per handshake); the server's own CPU per handshake is the "
                 "comparison that holds.",
    },
    {
        "id": "http2",
        "title": "Cache hits over HTTP/2, 10 connections × 10 streams",
        "unit": "requests/s",
        "better": "higher",
        "groups": [
            (label, [
                ("Shellac", Figure(H2, row, 2, index=0)),
                ("nginx", Figure(H2, row, 2, index=1)),
            ])
            for label, row in [
                ("h2c, 6.3 KB", "h2c `/hit6k`"),
                ("h2c, 100 B", "h2c `/small100`"),
                ("TLS, 6.3 KB", "TLS `/hit6k`"),
                ("TLS, 100 B", "TLS `/small100`"),
            ]
        ],
        "command": "RUNS=5 N=100000 IDLE=200 bench/h2.sh  # and TLS=1 ...",
        "section": H2,
        "notes": "h2load, medians of five runs on a quiet machine; one worker each.",
    },
    {
        "id": "big",
        "title": "A 21 MB object from the cache, 10 connections",
        "unit": "MB/s",
        "better": "higher",
        "groups": [
            ("21 MB hit", [
                ("Shellac", Figure(BIG, "00:09", 4)),
                ("Varnish", Figure(BIG, "00:09", 3)),
                ("nginx proxy_cache", Figure(BIG, "00:09", 2)),
            ]),
        ],
        "command": "ONLY=big21m RUNS=5 DURATION=5 bench/prio.sh bench/run.sh",
        "section": BIG,
        "notes": "The first of the section's invocations (the notebook has the others); "
                 "medians of five 5-second runs, each server alone on CPU 0.",
    },
    {
        "id": "restart",
        "title": "Restart after kill -9 with 310,000 objects on disk",
        "unit": "seconds until the cache index is complete",
        "better": "lower",
        "groups": [
            ("kill -9, then start", [
                ("Shellac", Figure(DISK, "**restart after `kill -9`**", 1, after="recovery ")),
                ("nginx proxy_cache", Figure(DISK, "**restart after `kill -9`**", 3,
                                             after="loader done ")),
            ]),
        ],
        "scale": {"Shellac": 0.001},
        "command": "cargo run --release --example disk_restart -- 310000",
        "section": DISK,
        "notes": "Both serve hits from the first request after the restart; nginx's cache "
                 "loader then walks the 310,000 files (the brief's incident 1) before its "
                 "index and size accounting are complete. Shellac reads the regions' "
                 "summaries.",
    },
    {
        "id": "replay",
        "title": "Hits from the disk tier right after that restart (every key once)",
        "unit": "requests/s",
        "better": "higher",
        "groups": [
            ("310,000 keys, one core", [
                ("Shellac", Figure(DISK, "replay of all 310,000 keys", 1)),
                ("nginx proxy_cache", Figure(DISK, "replay of all 310,000 keys", 3)),
            ]),
        ],
        "command": "cargo run --release --example disk_restart -- 310000",
        "section": DISK,
        "notes": "nginx opens, reads and closes one file per hit; Shellac reads from one "
                 "preallocated file through its in-memory index.",
    },
    {
        "id": "fleet",
        "title": "Three nodes, one miss storm: origin requests per key",
        "unit": "origin requests per key",
        "better": "lower",
        "groups": [
            ("100,000 keys × 3 nodes", [
                ("with the shared tier", Figure(FLEET, "the same **with** the shared tier", 1)),
                ("without it", Figure(FLEET, "miss storm, 100,000 keys", 1)),
            ]),
        ],
        "decimals": 3,
        "command": "bench/fleet.sh",
        "section": FLEET,
        "notes": "Six redis-server processes (3 masters, 3 replicas) and three Shellac nodes "
                 "on loopback; every key reaches all three nodes within the same "
                 "millisecond, and the fleet fetches it once.",
    },
]


def fmt(value, decimals=None):
    """123534.0 → "123,534"; 224.3 → "224.3"; 0.223 → "0.223"; with `decimals`, that many."""
    if decimals is not None:
        return f"{value:,.{decimals}f}"
    if value == int(value):
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3f}".rstrip("0").rstrip(".")


def values(comparison, notebook):
    """[(group label, [(series, value)])], scaled where the notebook's unit differs."""
    scale = comparison.get("scale", {})
    out = []
    for label, series in comparison["groups"]:
        out.append((label, [(name, fig.read(notebook) * scale.get(name, 1.0))
                            for name, fig in series]))
    return out


def svg(comparison, data):
    """A horizontal bar chart: one block of bars per group, Shellac's bar in colour, each bar
    labelled with its value. Plain SVG 1.1, no script, no external font or style."""
    width, left, right = 680, 200, 90
    bar, gap, group_gap, top = 20, 6, 18, 54
    rows = sum(len(s) for _, s in data)
    height = top + rows * (bar + gap) + len(data) * (group_gap + 16) + 30
    peak = max(v for _, s in data for _, v in s) or 1.0
    span = width - left - right
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="10" y="22" font-size="15" font-weight="bold">'
        f'{escape(comparison["title"])}</text>',
        f'<text x="10" y="40" fill="#555555">{escape(comparison["unit"])}, '
        f'{comparison["better"]} is better</text>',
    ]
    y = top
    for label, series in data:
        y += 16
        out.append(f'<text x="10" y="{y - 3}" font-weight="bold">{escape(label)}</text>')
        for name, value in series:
            w = max(1.0, span * value / peak)
            colour = "#1f6fb2" if name == "Shellac" or name.startswith("with ") else "#9aa5b1"
            out.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">'
                       f'{escape(name)}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar}" '
                       f'fill="{colour}"/>')
            out.append(f'<text x="{left + w + 6:.1f}" y="{y + 15}">'
                       f'{fmt(value, comparison.get("decimals"))}</text>')
            y += bar + gap
        y += group_gap
    out.append(f'<text x="10" y="{height - 10}" fill="#777777" font-size="11">'
               f'From bench/RESULTS.md by bench/charts.py</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def anchor(heading):
    """GitHub's anchor for a heading."""
    slug = heading.strip().lower()
    slug = re.sub(r"[^\w\- ]", "", slug)
    return slug.replace(" ", "-")


def page(notebook, charts):
    """docs/performance.md."""
    lines = [
        "# Performance",
        "",
        "<!-- Written by bench/charts.py from bench/RESULTS.md; edit those, then run",
        "     `python3 bench/charts.py` (tests/docs.rs checks that this page is up to date). -->",
        "",
        "The headline comparisons with nginx and Varnish on the same machine and cores, as",
        "measured in [bench/RESULTS.md](../bench/RESULTS.md) — the lab notebook, where each run",
        "is written up with its machine, load, commit and what was weak. The machine is a",
        "2-vCPU virtual machine shared with other work, so single runs vary; the figures are",
        "medians, and the notebook gives the runs. How to set up and run the benchmarks:",
        "[bench/README.md](../bench/README.md).",
        "",
    ]
    for comparison, data in charts:
        lines.append(f"## {comparison['title']}")
        lines.append("")
        lines.append(f"![{comparison['title']}](performance/{comparison['id']}.svg)")
        lines.append("")
        names = []
        for _, series in data:
            for name, _ in series:
                if name not in names:
                    names.append(name)
        lines.append("| | " + " | ".join(names) + " |")
        lines.append("|---" * (len(names) + 1) + "|")
        for label, series in data:
            got = dict(series)
            cells = [fmt(got[n], comparison.get("decimals")) if n in got else "" for n in names]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(f"In {comparison['unit']}; {comparison['better']} is better. "
                     f"{comparison['notes']}")
        lines.append("")
        lines.append(f"Reproduce: `{comparison['command']}`. Source: bench/RESULTS.md, "
                     f"[{comparison['section']}](../bench/RESULTS.md#"
                     f"{anchor(find_heading(notebook, comparison['section']))}).")
        lines.append("")
    return "\n".join(lines)


def find_heading(notebook, prefix):
    for line in notebook.lines:
        m = re.match(r"^#+ (.*)$", line)
        if m and m.group(1).startswith(prefix):
            return m.group(1)
    raise LookupError(prefix)


def outputs():
    """{path: text} of everything this script writes."""
    with open(RESULTS, encoding="utf-8") as f:
        notebook = Notebook(f.read())
    charts = [(c, values(c, notebook)) for c in COMPARISONS]
    files = {PAGE: page(notebook, charts)}
    for comparison, data in charts:
        files[os.path.join(CHART_DIR, comparison["id"] + ".svg")] = svg(comparison, data)
    return files


def main(argv):
    check = "--check" in argv[1:]
    try:
        files = outputs()
    except LookupError as e:
        print(f"bench/charts.py: {e}", file=sys.stderr)
        return 1
    stale = []
    for path, text in sorted(files.items()):
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        if old == text:
            continue
        if check:
            stale.append(os.path.relpath(path, ROOT))
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {os.path.relpath(path, ROOT)}")
    if check:
        known = set(files)
        if os.path.isdir(CHART_DIR):
            for name in sorted(os.listdir(CHART_DIR)):
                path = os.path.join(CHART_DIR, name)
                if path not in known:
                    stale.append(os.path.relpath(path, ROOT) + " (no comparison writes it)")
        if stale:
            print("bench/charts.py --check: not what bench/RESULTS.md gives (run "
                  "`python3 bench/charts.py`):\n  " + "\n  ".join(stale), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
