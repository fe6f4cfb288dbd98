#!/usr/bin/env python3
"""Lists packed lines in the library files: a `;` joining statements, a tuple assignment `(a, b) = (x, y)`, or several
variables in one `var`/`let`. The library is written one statement and one declaration per line (issue "A small core
with public seams"). Exit 1 when there is one. Usage: python3 Scripts/packed-lines.py [FILE...]"""
import glob, re, sys

def code_only(line):
    """The line without string literals and comments (enough for this code base: no multi-line strings)."""
    out, i, quoted = [], 0, False
    while i < len(line):
        c = line[i]
        if quoted:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                quoted = False
            i += 1
            continue
        if c == '"':
            quoted = True
        elif line.startswith("//", i):
            break
        else:
            out.append(c)
        i += 1
    return "".join(out)

TUPLE = re.compile(r"^\s*\([^()]*,[^()]*\)\s*=\s*\(")
MULTI = re.compile(r"^\s*(?:(?:private|fileprivate|public|static|internal)\s+)*(?:var|let)\s+\w+(?:\s*:\s*[^=,(]+)?(?:\s*=\s*[^,(\[{]+)?,\s*\w+\s*[:=]")
found = 0
for path in sys.argv[1:] or sorted(glob.glob("Sources/RestManager/*.swift")):
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        code = code_only(line)
        if ";" in code or TUPLE.search(code) or MULTI.search(code):
            print(f"{path}:{number}: {line.rstrip()}")
            found += 1
if found:
    print(f"{found} packed lines: write one statement and one declaration per line")
sys.exit(1 if found else 0)
