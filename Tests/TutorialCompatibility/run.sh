#!/usr/bin/env bash
# Compiles a program written against the tutorial's API with RestManager.swift alone (Swift 6, warnings as errors),
# and runs it against Python's stock http.server.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
server_pid=""
cleanup() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# RESTMANAGER_LIBRARY_FILE: another copy of the file to check (Scripts/apple-typecheck.sh passes the
# one with its Apple-platform branches selected).
library="${RESTMANAGER_LIBRARY_FILE:-$root/Sources/RestManager/RestManager.swift}"
# The library files themselves, alone and with each add-on in every language mode and app-target setting, are
# Scripts/copy-in-check.sh's; here the tutorial's program is compiled with the core alone and run.
echo "== the tutorial program, compiled with the file alone"
swiftc -swift-version 6 -warnings-as-errors "$library" "$root/Tests/TutorialCompatibility/main.swift" -o "$work/tutorial"

# The site: directories with index.html, as a static host would serve a REST-shaped tree.
SITE_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
export SITE_PORT
site="$work/site"
mkdir -p "$site/api/users/1" "$site/img/faces"
python3 - "$site" <<'PY'
import json, os, sys
site = sys.argv[1]
names = [("George","Bluth"),("Janet","Weaver"),("Emma","Wong"),("Eve","Holt"),("Charles","Morris"),("Tracey","Ramos"),
         ("Michael","Lawson"),("Lindsay","Ferguson"),("Tobias","Funke"),("Byron","Fields"),("George","Edwards"),("Rachel","Howell")]
port = os.environ["SITE_PORT"]
users = [{"id": i + 1, "email": f"{f.lower()}.{l.lower()}@reqres.in", "first_name": f, "last_name": l,
          "avatar": f"http://127.0.0.1:{port}/img/faces/{i + 1}-image.jpg"} for i, (f, l) in enumerate(names)]
open(f"{site}/api/users/index.html", "w").write(json.dumps({"page": 2, "per_page": 6, "total": 12, "total_pages": 2, "data": users[6:]}))
open(f"{site}/api/users/1/index.html", "w").write(json.dumps({"data": users[0]}))
open(f"{site}/img/faces/1-image.jpg", "wb").write(bytes([0xFF, 0xD8, 0xFF, 0xE0]) + os.urandom(2048) + bytes([0xFF, 0xD9]))
PY

echo "== python3 -m http.server on 127.0.0.1:$SITE_PORT"
python3 -m http.server --bind 127.0.0.1 --directory "$site" "$SITE_PORT" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $SITE_PORT), 0.2)" 2>/dev/null && break
  sleep 0.1  # waiting for an external process to listen; no event to wait on
done
"$work/tutorial" "http://127.0.0.1:$SITE_PORT" "$site/img/faces/1-image.jpg"
