#!/usr/bin/env python3
"""Type-checks every ```swift block of README.md and the DocC articles against the library files, so that an example
that rots fails CI. Each block is compiled as the body of an `async throws` function (its names are its own), with
Scripts/examples-prelude.swift declaring the names the examples assume (`rest`, `usersURL`, `UserPage`, …).
A comment line right before a block's fence changes how it is checked:
  <!-- example: program -->         a whole main.swift: compiled alone with the library files (Swift 6)
  <!-- example: app-target -->      top-level declarations of an app: compiled with the library files under a new
                                    Xcode 26 app target's settings (MainActor default isolation, …)
  <!-- example: declarations -->    top-level declarations, compiled beside the other blocks
  <!-- example: package-program -->  a whole main.swift that imports the package's modules (MockServer, RestManager):
                                    compiled against the built modules (`swift build --build-tests` first)
  <!-- example: package-declarations -->  test code or declarations importing the package's modules, likewise
  <!-- example: prelude CODE -->    CODE is put before the block (names it assumes that the shared prelude lacks)
  <!-- example: not compiled: WHY -->   skipped, with the reason (another module's test code, a fragment)
Errors point at the Markdown line. Usage: python3 Scripts/check-examples.py [FILE.md …]"""
import glob, os, re, subprocess, sys, tempfile

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
documents = sys.argv[1:] or ["README.md"] + sorted(glob.glob("Sources/RestManager/RestManager.docc/*.md"))
library = sorted(glob.glob("Sources/RestManager/*.swift"))
app = ["-default-isolation", "MainActor", "-enable-upcoming-feature", "NonisolatedNonsendingByDefault",
       "-enable-upcoming-feature", "InferIsolatedConformances"]
fence = re.compile(r"^```swift\s*$")
marker = re.compile(r"^<!-- example: (program|app-target|package-program|package-declarations|declarations|"
                    r"not compiled: .+|prelude .+) -->$")

bodies, declarations, separate, skipped = [], [], [], []
for document in documents:
    lines = open(document).read().split("\n")
    index = 0
    while index < len(lines):
        if not fence.match(lines[index]):
            index += 1
            continue
        start = index + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        block = "\n".join(lines[start:end])
        kinds = [marker.match(lines[i]).group(1) for i in range(index - 1, -1, -1)
                 if i >= index - 2 and marker.match(lines[i])]
        kind = kinds[0] if kinds else "body"
        prelude = next((k[len("prelude "):] for k in kinds if k.startswith("prelude ")), "")
        if kind.startswith("prelude "):
            kind = next((k for k in kinds if not k.startswith("prelude ")), "body")
        located = f'#sourceLocation(file: "{document}", line: {start + 1})\n{block}\n#sourceLocation()\n'
        if kind.startswith("not compiled"):
            skipped.append(f"{document}:{start}")
        elif kind in ("program", "app-target", "package-program", "package-declarations"):
            separate.append((kind, f"{document}:{start}", located))
        elif kind == "declarations":
            declarations.append(located)
        else:
            name = f"example{len(bodies)}"
            bodies.append(f"func {name}() async throws {{\n{prelude}\n{located}}}\n")
        index = end + 1

failed = False
with tempfile.TemporaryDirectory() as work:
    shared = os.path.join(work, "examples.swift")
    open(shared, "w").write("import Foundation\n#if canImport(FoundationNetworking)\nimport FoundationNetworking\n#endif\n"
                            + "\n".join(declarations + bodies))
    runs = [("blocks", ["-swift-version", "6", "-parse-as-library"], [shared, "Scripts/examples-prelude.swift"])]
    modules = None
    if any(kind.startswith("package") for kind, _, _ in separate):
        binaries = subprocess.run(["swift", "build", "--show-bin-path"], capture_output=True, text=True).stdout.strip()
        modules = os.path.join(binaries, "Modules")
        if not os.path.exists(os.path.join(modules, "MockServer.swiftmodule")):
            subprocess.run(["swift", "build", "--build-tests"], check=True, capture_output=True)
    for number, (kind, where, text) in enumerate(separate):
        main = kind in ("program", "package-program")
        path = os.path.join(work, f"{number}", "main.swift" if main else "declarations.swift")
        os.makedirs(os.path.dirname(path))
        imports = "import Foundation\n#if canImport(FoundationNetworking)\nimport FoundationNetworking\n#endif\n"
        open(path, "w").write((imports if kind == "app-target" else "") + text)
        flags = ["-swift-version", "6"] + ([] if main else ["-parse-as-library"]) + (app if kind == "app-target" else [])
        sources = [path] if kind.startswith("package") else library + [path]
        if kind.startswith("package"):
            flags += ["-I", modules]
        runs.append((f"{where} ({kind})", flags, sources))
    for name, flags, files in runs:
        sources = files if name != "blocks" else library + files
        # Warnings count in programs and app code; a snippet may leave a value unused.
        strict = [] if name == "blocks" else ["-warnings-as-errors"]
        result = subprocess.run(["swiftc", "-typecheck"] + strict + flags + sources,
                                capture_output=True, text=True)
        kinds = "error|warning" if strict else "error"
        errors = [line for line in result.stderr.split("\n") if re.match(rf"^[^ ].*: ({kinds}):", line)]
        if result.returncode != 0 or errors:
            failed = True
            print(f"FAILED: {name}")
            print("\n".join(errors[:20]) or result.stderr[-2000:])
total = len(bodies) + len(declarations) + len(separate)
print(f"examples: {total} Swift blocks type-checked ({len(separate)} as whole programs or app code), "
      f"{len(skipped)} marked not compiled, in {len(documents)} documents")
sys.exit(1 if failed else 0)
