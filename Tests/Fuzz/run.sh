#!/usr/bin/env bash
# A coverage-guided fuzzer (libFuzzer with AddressSanitizer) over the library's functions that read text from outside:
# URL and body redaction, URL checks, redirect targets, baseURL joining, line splitting and SSE parsing, Content-Range.
# Each input's first byte picks the function (Tests/Fuzz/fuzz.swift). Not part of CI: run it after changing them.
#   bash Tests/Fuzz/run.sh [SECONDS]   (default 300; a crash is saved in .build/fuzz/ and ends the run with exit 1)
#   bash Tests/Fuzz/run.sh FILE        (runs that one saved input again)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
seconds="${1:-300}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
artifacts="$root/.build/fuzz"
mkdir -p "$artifacts" "$work/corpus"
# Compiled as a user copies the files in: one module, so the internal functions are reachable.
swiftc -sanitize=fuzzer,address -parse-as-library -O -swift-version 6 \
  "$root"/Sources/RestManager/*.swift "$root/Tests/Fuzz/fuzz.swift" -o "$work/fuzzer"
if [[ -f "$seconds" ]]; then
  SWIFT_BACKTRACE=enable=no "$work/fuzzer" "$seconds"
  exit
fi
# One seed per target, each starting with its selector byte.
seeds=(
  '\x00https://user:secret@h/p?token=abc&x=1#f'
  '\x01http://h:99999/p'
  '\x02a b&c=d'
  '\x03../x?y=z'
  '\x04/users?page=2'
  '\x05\x03data: a\r\n\r\nid: 1\rdata: b\n\n'
  '\x06{"password":"x","a":[{"token":1}]}'
  '\x07bytes 0-4/11'
)
for index in "${!seeds[@]}"; do printf "${seeds[$index]}" > "$work/corpus/seed$index"; done
# Swift's backtracer would answer a crash instead of the sanitizer.
SWIFT_BACKTRACE=enable=no "$work/fuzzer" -max_len=512 -max_total_time="$seconds" -artifact_prefix="$artifacts/" \
  "$work/corpus"
