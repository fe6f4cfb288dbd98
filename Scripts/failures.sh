#!/usr/bin/env bash
# Prints the failing lines of a test log (XCTest assertions, crashes, sanitizer reports), so that the
# end of a CI log names what failed. Usage: Scripts/failures.sh LOG
grep -E "error: |failed \(|✘|Fatal error|Crash|WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer|SUMMARY:" "$1" | head -40
