#!/usr/bin/env bash
# The suite once more with code coverage: prints line coverage of the library file and of MockServer,
# and fails when the library file drops below 90 %.
set -euo pipefail
cd "$(dirname "$0")/.."
minimum=90
mkdir -p .build-coverage
swift test --enable-code-coverage --scratch-path .build-coverage >.build-coverage/test.log 2>&1 || {
  echo "tests failed under coverage:"; bash Scripts/failures.sh .build-coverage/test.log; exit 1; }
binary=.build-coverage/debug/RestManagerPackageTests.xctest
profile=.build-coverage/debug/codecov/default.profdata
# The toolchain's own llvm-cov: another LLVM on the PATH cannot read this profile format.
cov="$(dirname "$(command -v swiftc)")/llvm-cov"
[[ -x "$cov" ]] || cov=llvm-cov
report() { "$cov" report "$binary" -instr-profile="$profile" "$@"; }
# The TOTAL line's columns: regions, missed, cover, functions, missed, executed, lines, missed, cover, …
library=$(report Sources/RestManager/RestManager.swift | awk '/^TOTAL/ { print $10 }')
mock=$(report Sources/MockServer | awk '/^TOTAL/ { print $10 }')
echo "line coverage: Sources/RestManager/RestManager.swift $library, Sources/MockServer $mock"
for addon in Sources/RestManager/RestManager+*.swift; do
  echo "line coverage: $addon $(report "$addon" | awk '/^TOTAL/ { print $10 }')"
done
python3 -c "import sys; sys.exit(0 if float('${library%\%}') >= $minimum else 1)" \
  || { echo "the library file's line coverage is below $minimum %"; exit 1; }
