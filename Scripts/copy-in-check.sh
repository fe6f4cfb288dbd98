#!/usr/bin/env bash
# The library files compiled as an app compiles them when they are copied in: with the app target's settings.
# Every configuration below, for every file set (the core alone, the core with each add-on, all files), warnings as
# errors; then Tests/AppTarget/main.swift, app code in a MainActor-default target, is compiled with all the library
# files and run against Tests/AppTarget/server.py on loopback.
# Usage: Scripts/copy-in-check.sh [DIR]   DIR holds the library files (Sources/RestManager by default;
# Scripts/apple-typecheck.sh passes a copy with the Apple-platform branches selected).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-Sources/RestManager}"
work=$(mktemp -d)
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# A new Xcode 26 app target: Default Actor Isolation = MainActor, and "Approachable Concurrency".
app="-default-isolation MainActor -enable-upcoming-feature NonisolatedNonsendingByDefault"
app+=" -enable-upcoming-feature InferIsolatedConformances"
imports="-enable-upcoming-feature InternalImportsByDefault -enable-upcoming-feature MemberImportVisibility"
configs=(
  "Swift 5|-swift-version 5"
  "Swift 6|-swift-version 6"
  "a new Xcode 26 app (Swift 6, MainActor default, approachable concurrency)|-swift-version 6 $app"
  "Swift 5, MainActor default|-swift-version 5 -default-isolation MainActor"
  "ExistentialAny|-swift-version 6 -enable-upcoming-feature ExistentialAny"
  "InternalImportsByDefault and MemberImportVisibility|-swift-version 6 $imports"
  "all of the above, Swift 6|-swift-version 6 $app -enable-upcoming-feature ExistentialAny $imports"
  "all of the above, Swift 5|-swift-version 5 $app -enable-upcoming-feature ExistentialAny $imports"
)
addons=("$dir"/RestManager+*.swift)
sets=("$dir/RestManager.swift")
for addon in "${addons[@]}"; do sets+=("$dir/RestManager.swift $addon"); done
sets+=("$dir/RestManager.swift ${addons[*]}")

# One compilation; its log is kept only when it fails. -wmo -c runs the SIL diagnostics too (region-based
# isolation), which -typecheck would skip.
compile() {
  local id=$1 flags=$2 files=$3
  # shellcheck disable=SC2086
  swiftc $flags -warnings-as-errors -parse-as-library -wmo -module-name RestManager -c $files \
    -o "$work/$id.o" >"$work/$id.log" 2>&1 && rm -f "$work/$id.log" "$work/$id.o"
}

n=0
for config in "${configs[@]}"; do
  for files in "${sets[@]}"; do
    n=$((n + 1))
    compile "$n" "${config#*|}" "$files" &
    # Two at a time: this machine's cores.
    (($(jobs -r | wc -l) < 2)) || wait -n || true
  done
done
wait
failed=0
n=0
for config in "${configs[@]}"; do
  for files in "${sets[@]}"; do
    n=$((n + 1))
    [[ -f "$work/$n.log" ]] || continue
    failed=$((failed + 1))
    echo "FAILED: ${config%%|*}: $(for f in $files; do basename "$f" .swift; done | tr '\n' ' ')"
    grep -E '^[^ ].*: error:' "$work/$n.log" | sort -u | head -5
  done
  echo "${config%%|*}: ${#sets[@]} file sets"
done
if ((failed)); then
  echo "copy-in check: $failed of $n compilations failed"
  exit 1
fi
echo "copy-in check: $n compilations (${#configs[@]} configurations x ${#sets[@]} file sets), 0 errors, 0 warnings"

echo "== Tests/AppTarget/main.swift with every library file: a MainActor-default app, Swift 6 and Swift 5 modes"
python3 Tests/AppTarget/server.py >"$work/port" &
server_pid=$!
# Waiting for the server to print its port: the event that says it listens.
for _ in $(seq 1 200); do
  [[ -s "$work/port" ]] && break
  sleep 0.05
done
port=$(cat "$work/port")
for mode in "-swift-version 6 $app" "-swift-version 5 -default-isolation MainActor"; do
  # shellcheck disable=SC2086
  swiftc $mode -warnings-as-errors "$dir"/RestManager*.swift Tests/AppTarget/main.swift -o "$work/app"
  rm -rf "$work/scratch"
  mkdir "$work/scratch"
  echo "$mode:"
  timeout 120 "$work/app" "http://127.0.0.1:$port" "$work/scratch"
done
