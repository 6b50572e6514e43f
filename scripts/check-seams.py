#!/usr/bin/env python3
"""Checks that no room includes past its seam.

docs/architecture.md holds, between the markers `<!-- seams:begin -->` and
`<!-- seams:end -->`, a table with one row per room (a top-level source
folder): the room and the rooms (or single headers) its files may include
with `#include "..."`. This script reads that table, scans every .c, .h, .cu
and .cuh file of each room (subfolders included), and prints every include
the table does not allow, following includes transitively through other
rooms' headers (a header that re-exports a third room's header brings that
room in too). Exit status 1 when any is found, or when a source
folder has no row. Tests, benchmarks and tools are not rooms: they may
include anything.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")
NOT_ROOMS = {"tests", "bench", "scripts", "docs", "deploy", "build", "models", "shared"}
SOURCE = (".c", ".h", ".cu", ".cuh")


def read_table():
    text = open(DOC, encoding="utf-8").read()
    m = re.search(r"<!-- seams:begin -->(.*?)<!-- seams:end -->", text, re.S)
    if not m:
        sys.exit(f"check-seams: no seams table in {DOC}")
    allowed = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        room = cells[0].strip("`").rstrip("/")
        allowed[room] = {a.strip("`").rstrip("/") for a in cells[1].replace(",", " ").split()}
        allowed[room].add(room)
    return allowed


def rooms_on_disk():
    out = []
    for name in sorted(os.listdir(ROOT)):
        p = os.path.join(ROOT, name)
        if name.startswith(".") or name in NOT_ROOMS or not os.path.isdir(p):
            continue
        for dirpath, _, files in os.walk(p):
            if any(f.endswith(SOURCE) for f in files):
                out.append(name)
                break
    return out


INCLUDES = {}


def includes(rel):
    """The project headers rel (a path from the root) includes: (line, header) pairs."""
    if rel not in INCLUDES:
        out = []
        path = os.path.join(ROOT, rel)
        if os.path.isfile(path):
            for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and "/" in m.group(1):
                    out.append((n, m.group(1)))
        INCLUDES[rel] = out
    return INCLUDES[rel]


def allows(room, allowed, inc):
    return inc.split("/")[0] in allowed[room] or inc in allowed[room]


def check_file(room, allowed, rel, bad):
    """Every header rel reaches, directly or through other headers, must be
    the room's own or one its row allows: a header of another room that
    re-exports a third room's header brings that room in too."""
    seen = set()
    todo = [(n, inc, None) for n, inc in includes(rel)]
    while todo:
        n, inc, via = todo.pop()
        if inc in seen:
            continue
        seen.add(inc)
        if not allows(room, allowed, inc):
            bad.append(f"{rel}:{n}: {room}/ includes {inc}" + (f" (through {via})" if via else ""))
            continue
        if inc.split("/")[0] != room:  # follow another room's header: what it re-exports
            todo.extend((n, sub, via or inc) for _, sub in includes(inc))


def main():
    allowed = read_table()
    bad = []
    for room in rooms_on_disk():
        if room not in allowed:
            bad.append(f"{room}/: a source folder with no row in the seams table of docs/architecture.md")
            continue
        for dirpath, _, files in os.walk(os.path.join(ROOT, room)):
            for f in sorted(files):
                if f.endswith(SOURCE):
                    check_file(room, allowed, os.path.relpath(os.path.join(dirpath, f), ROOT), bad)
    for b in bad:
        print(b)
    if bad:
        print(f"check-seams: {len(bad)} include(s) past a seam (allowed lists: docs/architecture.md)")
        return 1
    print(f"check-seams: every include within its seam ({len(allowed)} rooms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
