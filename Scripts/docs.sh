#!/usr/bin/env bash
# Builds the DocC documentation from the library files' symbol graph (the core and its add-ons) and the catalog, warnings as
# errors (a broken symbol link fails). Output: .build-docs/RestManager.doccarchive (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
output="${1:-.build-docs/RestManager.doccarchive}"
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
swiftc -emit-module -module-name RestManager -parse-as-library -swift-version 6 \
  -emit-module-path "$graphs/RestManager.swiftmodule" \
  -emit-symbol-graph -emit-symbol-graph-dir "$graphs" -symbol-graph-minimum-access-level public \
  Sources/RestManager/*.swift
# Every public declaration has a /// summary (attributes such as @discardableResult may stand between).
python3 - <<'PY'
import glob, re, sys
missing = []
for path in sorted(glob.glob("Sources/RestManager/*.swift")):
  lines = open(path).read().split("\n")
  for index, line in enumerate(lines):
    if re.match(r"\s*(nonisolated )?public (?!extension|import)", line) or re.match(r"\s*@\w+.*\bpublic\b", line):
        previous = index - 1
        while previous >= 0 and lines[previous].strip().startswith("@"):
            previous -= 1
        if previous < 0 or not lines[previous].strip().startswith("///"):
            missing.append(f"{path}:{index + 1}: {line.strip()}")
if missing:
    print("public declarations without a /// summary:\n" + "\n".join(missing))
    sys.exit(1)
PY
mkdir -p "$(dirname "$output")"
docc convert Sources/RestManager/RestManager.docc --additional-symbol-graph-dir "$graphs" \
  --fallback-display-name RestManager --fallback-bundle-identifier org.restmanager.RestManager \
  --output-path "$output" --warnings-as-errors
echo "documentation: $output (to browse it: python3 -m http.server -d $output, then open /documentation/restmanager)"
