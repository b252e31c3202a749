#!/usr/bin/env python3
"""Test-case names become CTest names and doctest filters, where ',', ';', '[', ']', '*', '?'
and '\\' have meanings; this lists (or with --fix, rewrites) names that contain them."""
import re
import sys
from pathlib import Path

BAD = re.compile(r"[,;\[\]*?\\]")
fix = "--fix" in sys.argv
bad_total = 0
for path in sorted(Path(__file__).resolve().parents[1].joinpath("tests").rglob("*.cpp")):
    text = path.read_text()

    def repl(m):
        global bad_total
        name = m.group(2)
        if not BAD.search(name):
            return m.group(0)
        bad_total += 1
        print(f"{path.name}: {name}")
        new = name.replace(", ", " ").replace(",", " ").replace(";", " -").replace("[", "(").replace("]", ")")
        new = new.replace("*", "x").replace("?", "").replace("\\\\", "/")
        return m.group(1) + new + m.group(3)

    new_text = re.sub(r'(TEST_CASE\(\s*")((?:[^"\\]|\\.)*)(")', repl, text)
    if fix and new_text != text:
        path.write_text(new_text)
sys.exit(1 if bad_total and not fix else 0)
