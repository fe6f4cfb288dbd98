#!/usr/bin/env python3
"""Runs chosen mutants of one library file against a few test classes, in a copy of the tree.

    python3 Scripts/untriaged-mutants.py Sources/RestManager/RestManager+Transfers.swift | cut -d' ' -f1 > /tmp/keys
    python3 Scripts/screen-mutants.py Sources/RestManager/RestManager+Transfers.swift \
        --filter 'DownloadTests|TransferIntegrityTests' --keys /tmp/keys > /tmp/screen.log

Copies Package.swift, Sources, Tests and Scripts to --copy (default /tmp/mutants-copy), builds there, then for each
mutant whose key is listed: puts it in, builds, runs `swift test --skip-build --filter FILTER` with a timeout, and
prints one line per mutant ending in `[key]` (killed, killed (timeout), SURVIVED, does not compile). The copy's file
is restored at the end, but its .build holds the last mutant: the next run builds again first.

A mutant can damage the machine as the tests run as root (one made an upload remove the file it was given, and a test
gave it /dev/zero): the run stops when a device the tests use has gone. Do not run it beside other tests: a busy
machine turns slow tests into "killed (timeout)". Killing with a few classes is enough; a survivor must be run again
with every class of its feature before it is called a gap or equivalent (MUTATION-REPORT.md says how each was run).
"""
import argparse
import importlib.util
import os
import shutil
import signal
import subprocess
import sys

DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom"]


def run(command, cwd, seconds):
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=seconds)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, "timeout"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file", help="the library file, relative to the package (Sources/RestManager/…)")
    parser.add_argument("--filter", required=True, help="the test classes, as swift test --filter takes them")
    parser.add_argument("--keys", required=True, help="a file of mutant keys (the first word of each line)")
    parser.add_argument("--copy", default="/tmp/mutants-copy")
    parser.add_argument("--timeout", type=int, default=100, help="seconds for one test run")
    arguments = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("mutate", os.path.join(root, "Scripts", "mutate.py"))
    mutate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutate)

    os.makedirs(arguments.copy, exist_ok=True)
    for name in ["Package.swift", "Sources", "Tests", "Scripts"]:
        source = os.path.join(root, name)
        target = os.path.join(arguments.copy, name)
        if os.path.isdir(source):
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)
    path = os.path.join(arguments.copy, arguments.file)
    text = open(path).read()
    wanted = {line.split()[0] for line in open(arguments.keys) if line.strip()}
    chosen = [mutant for mutant in mutate.catalogue(text) if mutate.key_of(mutant) in wanted]
    print(f"{len(chosen)} mutants", flush=True)
    build = ["swift", "build", "--build-tests"]
    try:
        status, output = run(build, arguments.copy, 1800)
        if status != 0:
            sys.exit("the unchanged copy does not build:\n" + output[-2000:])
        for index, mutant in enumerate(chosen, 1):
            number, name, original, mutated = mutant
            lines = text.split("\n")
            lines[number - 1] = mutated
            open(path, "w").write("\n".join(lines))
            status, _ = run(build, arguments.copy, 900)
            if status != 0:
                verdict = "does not compile"
            else:
                test = ["swift", "test", "--skip-build", "--filter", arguments.filter]
                status, _ = run(test, arguments.copy, arguments.timeout)
                verdict = "killed (timeout)" if status is None else "killed" if status != 0 else "SURVIVED"
            print(f"[{index}/{len(chosen)}] {arguments.file}:{number} {name}: {verdict}  "
                  f"{original.strip()[:90]} -> {mutated.strip()[:90]} [{mutate.key_of(mutant)}]", flush=True)
            missing = [device for device in DEVICES if not os.path.exists(device)]
            if missing:
                sys.exit(f"stopped: {', '.join(missing)} went with the mutant above; later verdicts would be void")
    finally:
        open(path, "w").write(text)


if __name__ == "__main__":
    main()
