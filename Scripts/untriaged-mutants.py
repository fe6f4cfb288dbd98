#!/usr/bin/env python3
"""Lists the mutants of a library file that no table in Scripts/MUTATION-REPORT.md has triaged (their key is in no row).

Usage: python3 Scripts/untriaged-mutants.py [FILE]   (default Sources/RestManager/RestManager.swift)
Prints "key line operator: original -> mutated", one per mutant, and the counts on stderr; pass the keys to
`Scripts/mutate.py --keys` (or a faster run of a few test classes) to triage them.
"""
import importlib.util
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("mutate", os.path.join(root, "Scripts", "mutate.py"))
mutate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutate)
path = sys.argv[1] if len(sys.argv) > 1 else "Sources/RestManager/RestManager.swift"
with open(os.path.join(root, path)) as file:
    text = file.read()
with open(os.path.join(root, "Scripts", "MUTATION-REPORT.md")) as file:
    triaged = set(re.findall(r"\b[0-9a-f]{16}\b", file.read()))
mutants = mutate.catalogue(text)
untriaged = [m for m in mutants if mutate.key_of(m) not in triaged]
for number, name, original, mutated in untriaged:
    key = mutate.key_of((number, name, original, mutated))
    print(f"{key} {number} {name}: {original.strip()[:70]} -> {mutated.strip()[:60]}")
print(f"{path}: {len(mutants)} mutants, {len(untriaged)} untriaged", file=sys.stderr)
