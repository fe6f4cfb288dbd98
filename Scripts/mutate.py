#!/usr/bin/env python3
"""Mutation testing for Sources/RestManager/RestManager.swift (or, with --file, an add-on), with no packages.

Each mutant is one small, realistic bug (a flipped comparison, a swapped boolean operator, an
off-by-one, a dropped statement, a changed constant) put into a copy of the repository. The copy is
built and the tests most likely to notice are run; when they all pass, the whole suite runs. A
mutant that survives both is listed with file:line and the change, unless Scripts/mutation-equivalents.txt
explains why the change cannot be observed.

  Scripts/mutate.py --list                      # the catalogue, one mutant a line
  Scripts/mutate.py --sample 80 --seed 7        # a random sample
  Scripts/mutate.py --all                       # every mutant (slow: ~45 s each)
  Scripts/mutate.py --sample 6 --seed-from-commit --from-report Scripts/MUTATION-REPORT.md --check
                                                # CI: six of the mutants the report has triaged (killed or
                                                # equivalent), chosen by the commit; fails on an unexplained survivor
  Scripts/mutate.py --file F --keys K1,K2 --filter 'DownloadTests|UploadTests'
                                                # a quick screen of chosen mutants with a few test classes (keys:
                                                # Scripts/untriaged-mutants.py F lists the ones not yet triaged)
  ... --report FILE                             # write the markdown report
"""
import argparse, hashlib, os, random, re, shutil, subprocess, sys, time, datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = "Sources/RestManager/RestManager.swift"
EQUIVALENTS = os.path.join(ROOT, "Scripts", "mutation-equivalents.txt")
# Suites that are slow and test the mock server or the CLI rather than the library file.
SLOW = "MockServerFuzz|MockServerHardening|MockServerSlow|MockServerStress|MockServerHTTP|MockServerTestKit|MockServerStubsOnly|RestDemo|StressTests|ReqresConformance|ReadmeTests"

# (name, pattern, replacement): applied to one match at a time. Besides these: "return early" (a guard's
# condition made false), "table literal shortened" (a constant table or name loses its last character) and
# "drop statement" (below).
OPERATORS = [
    ("== to !=", r"(?<![=!<>])==(?!=)", "!="),
    ("!= to ==", r"!=(?!=)", "=="),
    ("< to <=", r"(?<![<\-])<(?![=<])(?=\s)", "<="),
    ("<= to <", r"<=", "<"),
    ("> to >=", r"(?<![\->])>(?![=>])(?=\s)", ">="),
    (">= to >", r">=", ">"),
    ("&& to ||", r"&&", "||"),
    ("|| to &&", r"\|\|", "&&"),
    ("true to false", r"\btrue\b", "false"),
    ("false to true", r"\bfalse\b", "true"),
    ("+ 1 to - 1", r"\+ 1\b", "- 1"),
    ("- 1 to + 1", r"(?<=\s)- 1\b", "+ 1"),
    ("min to max", r"\bmin\(", "max("),
    ("max to min", r"\bmax\(", "min("),
    ("drop negation", r"(?<=[(\s])!(?=[a-zA-Z_(])", ""),
    ("isEmpty negated", r"\.isEmpty\b", ".isEmpty == false"),
    ("hasPrefix to hasSuffix", r"\.hasPrefix\(", ".hasSuffix("),
    ("lowercased dropped", r"\.lowercased\(\)", ""),
]
# Whole statements that can be dropped (the line is commented out).
DROPPABLE = re.compile(r"^\s*(?:[a-zA-Z_.]+\.(?:setValue|removeValue|add|append|cancel|resume|reserveCapacity|removeAll)\(|"
                       r"defer \{|for name in|headers\.add|[a-z]+\?\.\w+\(|if [^{]+\{ [^}]+ \}$)")

# Guards whose condition binds nothing: "return early" makes the condition false.
EARLY_RETURN = re.compile(r"^(\s*guard )(?!let |var |case )(.+?)( else \{.*)$")
# Constant tables and names (`static let` string literals): their last character dropped.
TABLE_LITERAL = re.compile(r'"([^"\\]{3,})"')

def catalogue(text):
    mutants = []
    lines = text.split("\n")
    in_block_doc = False
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("//") or stripped.startswith("///") or stripped.startswith("#"):
            continue
        if stripped.startswith("case ") and stripped.endswith(":"):
            continue
        code = line.split(" //")[0]
        # Outside string literals only: skip lines whose matches fall inside quotes.
        for name, pattern, replacement in OPERATORS:
            for match in re.finditer(pattern, code):
                before = code[:match.start()]
                if before.count('"') % 2 == 1:
                    continue
                mutated = line[:match.start()] + replacement + line[match.end():]
                mutants.append((number, name, line, mutated))
        early = EARLY_RETURN.match(line.split(" //")[0])
        if early and "let " not in early.group(2) and early.group(2) != "false":
            mutants.append((number, "return early", line, early.group(1) + "false" + early.group(3) + line[len(line.split(" //")[0]):]))
        if stripped.startswith(("static let", "private static let")):
            for match in TABLE_LITERAL.finditer(line):
                mutated = line[:match.end(1) - 1] + line[match.end(1):]
                mutants.append((number, "table literal shortened", line, mutated))
        if "lock" in stripped.lower() and "unlock" in stripped.lower():
            continue  # dropping an unlock only deadlocks: always caught, never informative
        if DROPPABLE.match(line) and not stripped.endswith("{") or stripped.startswith("defer {") and stripped.endswith("}"):
            indent = line[:len(line) - len(line.lstrip())]
            mutants.append((number, "drop statement", line, indent + "// " + stripped))
    return mutants

DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom"]

def run(command, cwd, timeout):
    """Runs `command` in a process group of its own; on timeout the whole group is killed, and every process
    running from this checkout's .build (swift test's xctest child), so a hanging mutant leaves nothing behind."""
    # errors="replace": a test may print bytes that are not UTF-8 (a mutant's half of a character);
    # reading them must not end the run (CI on 55785f3 stopped with a UnicodeDecodeError).
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        # swift test may start xctest in a group of its own: two hung ones outlived CI on 12e8945.
        subprocess.run(["pkill", "-9", "-f", os.path.join(os.path.abspath(cwd), ".build") + "/"], check=False)
        output, _ = process.communicate()
        return 124, output

def equivalents():
    known = {}
    if os.path.exists(EQUIVALENTS):
        for line in open(EQUIVALENTS):
            if line.strip() and not line.startswith("#") and " | " in line:
                key, reason = line.rstrip("\n").split(" | ", 1)
                known[key.strip()] = reason.strip()
    return known

def key_of(mutant):
    number, name, original, mutated = mutant
    return hashlib.sha256((original.strip() + "\n" + mutated.strip()).encode()).hexdigest()[:16]

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--sample", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keys", help="comma-separated mutant keys (as --list prints them) to run again")
    parser.add_argument("--seed-from-commit", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 when a survivor is not listed as equivalent")
    parser.add_argument("--from-report", help="sample only mutants whose key this report lists (those already triaged)")
    parser.add_argument("--report")
    parser.add_argument("--file", help="the library file to mutate (default Sources/RestManager/RestManager.swift); "
                        "an add-on such as Sources/RestManager/RestManager+Transfers.swift")
    parser.add_argument("--filter", help="run only these test classes (swift test --filter), once, with --timeout: "
                        "a quick screen; a survivor must then be run with every class of its feature")
    parser.add_argument("--timeout", type=int, default=100, help="seconds for the --filter run")
    parser.add_argument("--work", default="/tmp/restmanager-mutation")
    parser.add_argument("--in-place", action="store_true",
                        help="mutate the file in this tree and reuse its .build (CI: incremental builds); restored at the end")
    arguments = parser.parse_args()
    global LIBRARY
    LIBRARY = arguments.file or LIBRARY

    text = open(os.path.join(ROOT, LIBRARY)).read()
    mutants = catalogue(text)
    if arguments.list:
        for mutant in mutants:
            print(f"{LIBRARY}:{mutant[0]}: {mutant[1]}: {mutant[2].strip()}  ->  {mutant[3].strip()}  [{key_of(mutant)}]")
        print(f"{len(mutants)} mutants")
        return 0
    seed = arguments.seed
    if arguments.seed_from_commit:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, stdout=subprocess.PIPE, text=True).stdout.strip() or "0"
        seed = int(head[:8], 16)
    if arguments.keys:
        wanted = set(arguments.keys.split(","))
        chosen = [mutant for mutant in mutants if key_of(mutant) in wanted]
    elif arguments.all:
        chosen = mutants
    else:
        population = mutants
        if arguments.from_report:
            # The key column of the report's tables (the last one).
            listed = set(re.findall(r"\| ([0-9a-f]{16}) \|$", open(arguments.from_report).read(), re.MULTILINE))
            population = [mutant for mutant in mutants if key_of(mutant) in listed]
            print(f"{len(population)} of the {len(mutants)} mutants are triaged in {arguments.from_report}", flush=True)
            if not population:
                print("the report triages none of this file's mutants: run a sample again and update the report")
                return 1
        if arguments.check:
            # A listed equivalent passes the check whether it survives or not, and a survivor runs the suite twice
            # (a killed mutant stops after one run): drawing one checks nothing and costs minutes of CI.
            known = equivalents()
            population = [mutant for mutant in population if key_of(mutant) not in known]
            print(f"{len(population)} of them are not listed as equivalent; the sample is drawn from those", flush=True)
        chosen = random.Random(seed).sample(population, min(arguments.sample or 6, len(population)))
    print(f"mutation testing {LIBRARY}: {len(chosen)} of {len(mutants)} mutants, seed {seed}", flush=True)

    # A private copy with its own build folder, so the working tree is never touched (or, with
    # --in-place, this tree, whose file is restored however the run ends).
    if arguments.in_place:
        work = ROOT
    else:
        work = arguments.work
        if os.path.exists(work):
            shutil.rmtree(work)
        shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".build*", ".git"))
    target = os.path.join(work, LIBRARY)
    try:
        return run_mutants(arguments, text, mutants, chosen, seed, work, target)
    finally:
        open(target, "w").write(text)

def run_mutants(arguments, text, mutants, chosen, seed, work, target):
    code, output = run(["swift", "build", "--build-tests"], work, 1800)
    if code != 0:
        print(output[-3000:]); print("the unmutated copy does not build"); return 2
    known = equivalents()
    killed, survived, stillborn, results = 0, [], 0, []
    started = time.time()
    for index, mutant in enumerate(chosen, 1):
        number, name, original, mutated = mutant
        lines = text.split("\n")
        lines[number - 1] = mutated
        open(target, "w").write("\n".join(lines))
        code, output = run(["swift", "build", "--build-tests"], work, 900)
        if code != 0:
            stillborn += 1
            verdict = "does not compile"
        else:
            # A mutant that hangs the tests is caught too: the timeouts are a few times a normal run. Three workers:
            # the tests mostly wait on sockets, and a run takes 40 s instead of 90 (a mutant needs one failure).
            parallel = ["--parallel", "--num-workers", "3"]
            if arguments.filter:
                code, output = run(["swift", "test", "--skip-build", "--filter", arguments.filter] + parallel, work,
                                   arguments.timeout)
            else:
                code, output = run(["swift", "test", "--skip-build", "--skip", SLOW] + parallel, work, 180)
                if code == 0:
                    code, output = run(["swift", "test", "--skip-build"] + parallel, work, 420)
            if code != 0:
                killed += 1
                verdict = "killed"
            else:
                survived.append(mutant)
                verdict = "SURVIVED" + (f" (equivalent: {known[key_of(mutant)]})" if key_of(mutant) in known else "")
        print(f"[{index}/{len(chosen)}] {LIBRARY}:{number} {name}: {verdict}  [{key_of(mutant)}]", flush=True)
        results.append((mutant, verdict))
        # Run as root, a mutant once made an upload remove the file it was given, and a test had given it /dev/zero:
        # every later verdict would have been void.
        missing = [device for device in DEVICES if not os.path.exists(device)]
        if missing:
            print(f"stopped: {', '.join(missing)} went with the mutant above; later verdicts would be void")
            return 2
    open(target, "w").write(text)
    counted = len(chosen) - stillborn
    equivalent = [m for m in survived if key_of(m) in known]
    unexplained = [m for m in survived if key_of(m) not in known]
    score = 100.0 * killed / max(1, counted - len(equivalent))
    print(f"{counted} mutants compiled, {killed} killed, {len(survived)} survived ({len(equivalent)} equivalent); "
          f"score {score:.1f}% of non-equivalent mutants; {stillborn} did not compile; {time.time() - started:.0f} s")
    for mutant in unexplained:
        print(f"survivor: {LIBRARY}:{mutant[0]}: {mutant[1]}: {mutant[2].strip()}  ->  {mutant[3].strip()}  [{key_of(mutant)}]")
    if arguments.report:
        digest = hashlib.sha256(text.encode()).hexdigest()
        with open(arguments.report, "w") as report:
            report.write(f"# Mutation testing report\n\n- Date: {datetime.date.today().isoformat()}\n- File: `{LIBRARY}` "
                         f"(sha256 `{digest}`)\n- Catalogue: {len(mutants)} mutants; this run: {len(chosen)} (seed {seed}), "
                         f"{counted} compiled\n- Killed: {killed}; survived: {len(survived)} ({len(equivalent)} equivalent)\n"
                         f"- Score: {score:.1f}% of non-equivalent mutants\n- Command: `Scripts/mutate.py "
                         f"{'--all' if arguments.all else f'--sample {len(chosen)} --seed {seed}'} --report {arguments.report}`\n\n"
                         "## Every mutant\n\n| line | operator | change | verdict | key |\n| --- | --- | --- | --- | --- |\n")
            for mutant, verdict in results:
                number, name, original, mutated = mutant
                change = f"`{original.strip()}` → `{mutated.strip()}`".replace("|", "\\|")
                report.write(f"| {number} | {name} | {change} | {verdict} | {key_of(mutant)} |\n")
    if arguments.check and unexplained:
        print("mutation check failed: the survivors above are not listed in Scripts/mutation-equivalents.txt")
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
