#!/usr/bin/env bash
# Type-checks the code every iPhone and Mac runs: the library files (core and add-ons) with their FoundationNetworking-only
# branches switched to their #else (the import fence stays), in Swift 5 and 6 modes, warnings as errors,
# then the copy-in matrix (Scripts/copy-in-check.sh) and the tutorial-compatibility program against that copy.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import glob, os, sys
for path in glob.glob("Sources/RestManager/*.swift"):
    text = open(path).read()
    fence = "#if canImport(FoundationNetworking)"
    first = text.index(fence) + len(fence)          # the import fence stays
    text = text[:first] + text[first:].replace(fence, "#if RESTMANAGER_APPLE_BRANCHES_CHECK")
    open(os.path.join(sys.argv[1], os.path.basename(path)), "w").write(text)
PY
count=$(cat "$work"/*.swift | grep -c "RESTMANAGER_APPLE_BRANCHES_CHECK")
for mode in 5 6; do
  swiftc -swift-version "$mode" -warnings-as-errors -typecheck "$work"/*.swift
done
echo "Apple-platform branches ($count switched): type-check clean in Swift 5 and 6 modes"
echo "== the copy-in matrix and the app-target program against the Apple-platform branches"
bash Scripts/copy-in-check.sh "$work"
echo "== the tutorial program against the Apple-platform branches"
RESTMANAGER_LIBRARY_FILE="$work/RestManager.swift" bash Tests/TutorialCompatibility/run.sh
