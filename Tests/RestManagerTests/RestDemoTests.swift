import Foundation
import XCTest
import MockServer

/// Runs the built `restdemo` binary against the mock server and checks stdout, stderr and exit codes.
final class RestDemoTests: MockServerTestCase {
    private func assertUsageError(_ arguments: [String], mentions text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let run = try restdemo(arguments, file: file, line: line)
        XCTAssertEqual(run.status, 64, arguments.joined(separator: " "), file: file, line: line)
        XCTAssertEqual(run.stdout, "", file: file, line: line)
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr, file: file, line: line)
        XCTAssertTrue(run.stderr.hasPrefix("restdemo: ") && run.stderr.contains(text), run.stderr, file: file, line: line)
    }

    func testUsersPageTwoPrintsAnAlignedTable() throws {
        let run = try restdemo(["users", "--page", "2"])
        XCTAssertEqual(run.status, 0)
        XCTAssertEqual(run.stderr, "")
        XCTAssertEqual(
            run.stdout,
            """
            ID  NAME              EMAIL
             7  Michael Lawson    michael.lawson@reqres.in
             8  Lindsay Ferguson  lindsay.ferguson@reqres.in
             9  Tobias Funke      tobias.funke@reqres.in
            10  Byron Fields      byron.fields@reqres.in
            11  George Edwards    george.edwards@reqres.in
            12  Rachel Howell     rachel.howell@reqres.in
            page 2 of 2, 12 users

            """)
        let request = try XCTUnwrap(server.lastRequest(path: "/api/users"))
        XCTAssertEqual(request.rawQuery, "page=2")
        XCTAssertEqual(request.header("x-api-key"), "reqres-free-v1")
    }

    /// `users --all` asks for every page, one request each, and prints them as one table.
    func testUsersAllPrintsEveryPage() throws {
        let run = try restdemo(["users", "--all", "--per-page", "5"])
        XCTAssertEqual(run.status, 0)
        XCTAssertEqual(run.stderr, "")
        let rows = run.stdout.split(separator: "\n")
        XCTAssertEqual(rows.first, "ID  NAME              EMAIL")
        XCTAssertEqual(rows.dropFirst().prefix(12).map { Int($0.prefix(2).trimmingCharacters(in: .whitespaces)) }, Array(1...12))
        XCTAssertEqual(rows.last, "12 users on 3 pages")
        XCTAssertEqual(
            server.receivedRequests.filter { $0.path == "/api/users" }.map(\.rawQuery),
            ["per_page=5", "per_page=5&page=2", "per_page=5&page=3"])
        let both = try restdemo(["users", "--all", "--page", "2"])
        XCTAssertEqual(both.status, 64)
        XCTAssertEqual(both.stderr, "restdemo: users: --all shows every page; leave out --page and --cache\n")
    }

    func testUsersWithPerPageAndHeaders() throws {
        let run = try restdemo(["users", "--per-page=4", "--headers", "--page", "3"])
        XCTAssertEqual(run.status, 0)
        XCTAssertTrue(run.stdout.contains("Content-Type: application/json; charset=utf-8\n"), run.stdout)
        XCTAssertTrue(run.stdout.hasSuffix("page 3 of 3, 12 users\n"), run.stdout)
        XCTAssertEqual(server.lastRequest(path: "/api/users")?.rawQuery, "page=3&per_page=4")
    }

    func testUserAndUnknownUser() throws {
        let found = try restdemo(["user", "2"])
        XCTAssertEqual(found.status, 0)
        XCTAssertTrue(
            found.stdout.hasPrefix("#2 Janet Weaver <janet.weaver@reqres.in>\navatar: \(server.baseURL.absoluteString)/img/faces/2-image.jpg"))
        let missing = try restdemo(["user", "100"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.stdout, "")
        XCTAssertEqual(missing.stderr, "restdemo: user 100: HTTP 404 Not Found\n")
    }

    func testCreateUpdateDelete() throws {
        let created = try restdemo(["create", "--name", "morpheus", "--job", "leader"])
        XCTAssertEqual(created.status, 0)
        XCTAssertNotNil(
            created.stdout.range(of: #"^created user \d{1,3} at \d{4}-\d\d-\d\dT[\d:.]+Z \(HTTP 201\)\n$"#, options: .regularExpression),
            created.stdout)
        let post = try XCTUnwrap(server.lastRequest(path: "/api/users"))
        XCTAssertEqual(post.method, "POST")
        XCTAssertEqual(String(decoding: post.body, as: UTF8.self), #"{"name":"morpheus","job":"leader"}"#)

        let patched = try restdemo(["update", "2", "--job", "zion", "--patch"])
        XCTAssertEqual(patched.status, 0)
        XCTAssertTrue(patched.stdout.hasPrefix("updated user 2 at "))
        XCTAssertEqual(server.lastRequest(path: "/api/users/2")?.method, "PATCH")
        XCTAssertEqual(try restdemo(["update", "2", "--name", "neo"]).status, 0)
        XCTAssertEqual(server.lastRequest(path: "/api/users/2")?.method, "PUT")

        let deleted = try restdemo(["delete", "2"])
        XCTAssertEqual(deleted.stdout, "deleted user 2 (HTTP 204)\n")
        XCTAssertEqual(server.lastRequest(path: "/api/users/2")?.method, "DELETE")
    }

    func testLoginAndRegister() throws {
        XCTAssertEqual(try restdemo(["login", "--email", "eve.holt@reqres.in", "--password", "cityslicka"]).stdout, "token: QpwL5tke4Pnpja7X4\n")
        XCTAssertEqual(
            try restdemo(["register", "--email", "eve.holt@reqres.in", "--password", "pistol"]).stdout,
            "registered user 4 with token QpwL5tke4Pnpja7X4\n")
        let unknown = try restdemo(["login", "--email", "peter@klaven", "--password", "x"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertEqual(unknown.stderr, "restdemo: HTTP 400 Bad Request: user not found\n")
        let undefined = try restdemo(["register", "--email", "sydney@fife", "--password", "x"])
        XCTAssertEqual(undefined.stderr, "restdemo: HTTP 400 Bad Request: Note: Only defined users succeed registration\n")
        try assertUsageError(["login", "--email", "eve.holt@reqres.in"], mentions: "missing --password")
    }

    func testAvatarIsSavedWhereAskedAndNamedByTheId() throws {
        let folder = scratch.appendingPathComponent("avatars")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let run = try restdemo(["avatar", "3", "--output", folder.path])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, folder.appendingPathComponent("avatar-3.jpg").path + "\n")
        let saved = try Data(contentsOf: folder.appendingPathComponent("avatar-3.jpg"))
        XCTAssertEqual(Array(saved.prefix(2)), [0xFF, 0xD8])
        XCTAssertEqual(server.lastRequest(path: "/img/faces/3-image.jpg")?.method, "GET")
        let defaultRun = try restdemo(["avatar", "4"])
        XCTAssertEqual(defaultRun.stdout, scratch.appendingPathComponent("cache/restdemo/avatar-4.jpg").path + "\n")
    }

    func testUnwritableOutputExits74() throws {
        let blocker = scratch.appendingPathComponent("file")
        try Data("x".utf8).write(to: blocker)
        let run = try restdemo(["avatar", "1", "--output", blocker.path + "/sub/avatar.jpg"])
        XCTAssertEqual(run.status, 74)
        XCTAssertTrue(run.stderr.hasPrefix("restdemo: cannot write "), run.stderr)
    }

    func testTourRunsTheTutorialCallsInOrder() throws {
        let run = try restdemo(["tour"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let headings = run.stdout.split(separator: "\n").filter { $0.hasPrefix("== ") }
        XCTAssertEqual(headings.count, 6)
        XCTAssertTrue(run.stdout.contains("GET /api/users/100 -> HTTP 404"))
        XCTAssertTrue(run.stdout.contains("avatar saved to "))
        XCTAssertEqual(
            server.receivedRequests.map { "\($0.method) \($0.target)" },
            [
                "GET /api/users", "GET /api/users?page=2", "GET /api/users/100", "POST /api/users",
                "GET /api/users/1", "GET /img/faces/1-image.jpg"
            ])
    }

    func testJSONPrintsTheServersBodyAsIs() throws {
        let run = try restdemo(["--json", "user", "2"])
        XCTAssertEqual(run.status, 0)
        XCTAssertTrue(run.stdout.hasPrefix(#"{"data":{"id":2,"email":"janet.weaver@reqres.in","#), run.stdout)
        let missing = try restdemo(["user", "23", "--json"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.stdout, "{}\n")
        XCTAssertEqual(missing.stderr, "restdemo: user 23: HTTP 404 Not Found\n", "an HTTP error says so on stderr, in one line")
    }

    /// `--timing`: after each call, a line per attempt (status, time to head, total, bytes) and the call's total go to
    /// stderr; stdout is what it is without it. A redirect is two attempts.
    func testTimingPrintsALinePerAttemptAndTheTotal() throws {
        let plain = try restdemo(["users", "--page", "2"])
        let run = try restdemo(["--timing", "users", "--page", "2"])
        XCTAssertEqual(run.status, 0)
        XCTAssertEqual(run.stdout, plain.stdout)
        let number = #"\d+\.\d ms"#
        let users =
            "^timing  #1 GET /api/users  HTTP 200  head \(number)  total \(number)  sent 0 B  received 1060 B\n"
            + "timing  total \(number)  1 attempt  0 redirects  0 retries  from network\n$"
        XCTAssertNotNil(run.stderr.range(of: users, options: .regularExpression), run.stderr)

        let file = scratch.appendingPathComponent("timed.bin")
        let download = try restdemo(["--timing", "download", "/_test/redirect/302?to=/_test/files/1000", "-o", file.path])
        XCTAssertEqual(download.status, 0, download.stderr)
        let lines = download.stderr.split(separator: "\n").filter { $0.hasPrefix("timing") }.map(String.init)
        let expected = [
            "timing  #1 GET /_test/redirect/302  HTTP 302  head N  total N  sent 0 B  received 33 B",
            "timing  #2 GET /_test/files/1000  HTTP 200  head N  total N  sent 0 B  received 1000 B",
            "timing  total N  2 attempts  1 redirect  0 retries  from network"
        ]
        XCTAssertEqual(lines.map { $0.replacingOccurrences(of: number, with: "N", options: .regularExpression) }, expected)

        // A redirect to a path holding escape sequences (clear the screen, once percent-decoded) is shown escaped.
        server.stub(path: "/x\u{1B}[2J", response: MockServer.Response(status: 200, body: Data("ok".utf8)))
        let hostile = try restdemo(["--timing", "download", "/_test/redirect/302?to=/x%251B%255B2J", "-o", file.path])
        XCTAssertFalse(hostile.stderr.contains("\u{1B}[2J"), hostile.stderr)
        XCTAssertTrue(hostile.stderr.contains("timing  #2 GET /x^[[2J  "), hostile.stderr)
    }

    func testVerboseShowsRedactedCurlStatusAndTime() throws {
        let run = try restdemo(["--verbose", "--api-key", "my-secret-key", "user", "2"])
        XCTAssertEqual(run.status, 0)
        XCTAssertTrue(run.stderr.contains("> curl '\(server.baseURL.absoluteString)/api/users/2'"), run.stderr)
        XCTAssertTrue(run.stderr.lowercased().contains("x-api-key: <redacted>"))
        XCTAssertFalse(run.stderr.contains("my-secret-key"))
        XCTAssertNotNil(run.stderr.range(of: #"< HTTP 200 in \d+\.\d ms"#, options: .regularExpression))
        XCTAssertEqual(server.lastRequest(path: "/api/users/2")?.header("x-api-key"), "my-secret-key")
    }

    func testBadInputIsAOneLineUsageError() throws {
        try assertUsageError(["users", "--page", "abc"], mentions: "--page must be a whole number from 1 to 1000000, not 'abc'")
        try assertUsageError(["users", "--bogus"], mentions: "unknown option '--bogus'")
        try assertUsageError(["user", "-3"], mentions: "ID must be a whole number from 1 to 1000000, not '-3'")
        try assertUsageError(["user"], mentions: "missing ID")
        try assertUsageError(["user", "1", "2"], mentions: "unexpected argument '2'")
        try assertUsageError(["fly"], mentions: "unknown command 'fly'")
        try assertUsageError(["--timeout", "soon", "users"], mentions: "--timeout needs a number of seconds above 0 and at most 86400, not 'soon'")
        try assertUsageError(["users", "--page"], mentions: "'--page' needs a value")
        try assertUsageError(["create", "--name", "--job", "x"], mentions: "'--name' needs a value")
        try assertUsageError(["update", "2"], mentions: "give --name, --job or both")
        let bare = try restdemo([], useServer: false)
        XCTAssertEqual(bare.status, 64)
        XCTAssertEqual(bare.stdout, "", "a usage error prints nothing on stdout")
        XCTAssertTrue(bare.stderr.hasSuffix("\nrestdemo: no command given\n"), bare.stderr)
        XCTAssertTrue(bare.stderr.contains("COMMAND"), "the overview goes to stderr: \(bare.stderr)")
        let help = try restdemo(["--help"], useServer: false)
        XCTAssertEqual(help.status, 0)
        XCTAssertEqual(help.stderr, "")
        XCTAssertTrue(help.stdout.hasPrefix("usage: restdemo [global options] COMMAND"), help.stdout)
    }

    /// A stdout that cannot be written to (a full disk) ends with exit code 74 and one line on stderr, never a crash
    /// (`FileHandle.write(_:)` traps on ENOSPC); a stderr that cannot be written to changes nothing.
    func testAFullStdoutIsExit74AndAFullStderrIsIgnored() throws {
        for arguments in [["--offline", "users"], ["--offline", "user", "2"], ["--offline", "--json", "user", "2"]] {
            let run = try restdemo(arguments, useServer: false, stdoutPath: "/dev/full")
            XCTAssertFalse(run.crashed, arguments.joined(separator: " "))
            XCTAssertEqual(run.status, 74, arguments.joined(separator: " "))
            XCTAssertTrue(run.stderr.hasPrefix("restdemo: cannot write the output: "), run.stderr)
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        }
        let failing = try restdemo(["--offline", "user", "999"], useServer: false, stderrPath: "/dev/full")
        XCTAssertFalse(failing.crashed)
        XCTAssertEqual(failing.status, 1, "HTTP 404 is exit 1 with or without its line on stderr")
        let progress = try restdemo(
            ["--offline", "download", "/_test/files/100000", "-o", scratch.appendingPathComponent("f.bin").path],
            useServer: false, stderrPath: "/dev/full")
        XCTAssertFalse(progress.crashed)
        XCTAssertEqual(progress.status, 0)
    }

    func testNumbersOutOfRangeAreUsageErrorsOfflineToo() throws {
        // These used to reach the offline mock's paging arithmetic, or a deadline computation, and trap.
        for (arguments, message) in [
            (
                ["--offline", "users", "--page", "9223372036854775807", "--per-page", "9223372036854775807"],
                "--page must be a whole number from 1 to 1000000, not '9223372036854775807'"
            ),
            (["--offline", "users", "--page", "9223372036854775808"], "--page must be a whole number from 1 to 1000000, not '9223372036854775808'"),
            (["--offline", "users", "--per-page", "1000001"], "--per-page must be a whole number from 1 to 1000000, not '1000001'"),
            (["--offline", "users", "--page", "0"], "--page must be a whole number from 1 to 1000000, not '0'"),
            (["--offline", "users", "--page", "+2"], "--page must be a whole number from 1 to 1000000, not '+2'"),
            (["--offline", "--timeout", "1e300", "users"], "--timeout needs a number of seconds above 0 and at most 86400, not '1e300'"),
            (["--offline", "--timeout", "inf", "users"], "--timeout needs a number of seconds above 0 and at most 86400, not 'inf'"),
            (["--offline", "--timeout", "nan", "users"], "--timeout needs a number of seconds above 0 and at most 86400, not 'nan'"),
            (["--offline", "--timeout", "-1", "users"], "--timeout needs a number of seconds above 0 and at most 86400, not '-1'"),
            (["--offline", "--timeout", "0x10", "users"], "--timeout needs a number of seconds above 0 and at most 86400, not '0x10'"),
            (["--offline", "--timeout", "1e3", "users"], "--timeout needs a number of seconds above 0 and at most 86400, not '1e3'"),
            (["--offline", "--timeout", "+5", "users"], "--timeout needs a number of seconds above 0 and at most 86400, not '+5'"),
            (["--offline", "user", "99999999999999999999"], "ID must be a whole number from 1 to 1000000, not '99999999999999999999'")
        ] {
            let run = try restdemo(arguments, useServer: false)
            XCTAssertFalse(run.crashed, arguments.joined(separator: " "))
            XCTAssertEqual(run.status, 64, arguments.joined(separator: " "))
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
            XCTAssertTrue(run.stderr.hasPrefix("restdemo: \(message) ("), run.stderr)
        }
        let largest = try restdemo(["--offline", "users", "--page", "1000000", "--per-page", "1000000"], useServer: false)
        XCTAssertEqual(largest.status, 0, largest.stderr)
        XCTAssertTrue(largest.stdout.hasSuffix("page 1000000 of 1, 12 users\n"), largest.stdout)
    }

    /// A base URL ending in "/" is the same base: `/api/users` goes to the server once, not as `//api/users`.
    func testABaseURLWithATrailingSlashIsTheSameBase() throws {
        let run = try restdemo(["--base-url", server.baseURL.absoluteString + "/", "user", "2"], useServer: false)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/api/users/2"])
    }

    func testAnHTMLAnswerExits65WithOrWithoutJSON() throws {
        let base = server.baseURL.absoluteString + "/_test/html"
        for arguments in [["users"], ["--json", "users"], ["user", "2"], ["user", "2", "--json"]] {
            let run = try restdemo(["--base-url", base] + arguments, useServer: false)
            XCTAssertEqual(run.status, 65, arguments.joined(separator: " "))
            XCTAssertEqual(run.stderr, "restdemo: the answer is not JSON (text/html; charset=utf-8, 58 bytes)\n", arguments.joined(separator: " "))
            XCTAssertEqual(run.stdout, "", arguments.joined(separator: " "))
        }
    }

    func testLoginStoresTheTokenForLaterCommandsAndLogoutRemovesIt() throws {
        let login = try restdemo(["login", "--email", "eve.holt@reqres.in", "--password", "cityslicka"])
        XCTAssertEqual(login.status, 0, login.stderr)
        let tokenFile = scratch.appendingPathComponent("config/restdemo/token")
        XCTAssertEqual(String(decoding: try Data(contentsOf: tokenFile), as: UTF8.self), "QpwL5tke4Pnpja7X4\n")
        let attributes = try FileManager.default.attributesOfItem(atPath: tokenFile.path)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let folder = try FileManager.default.attributesOfItem(atPath: tokenFile.deletingLastPathComponent().path)
        XCTAssertEqual((folder[.posixPermissions] as? NSNumber)?.intValue, 0o700)
        XCTAssertEqual(try restdemo(["user", "2"]).status, 0)
        XCTAssertEqual(server.lastRequest(path: "/api/users/2")?.header("Authorization"), "Bearer QpwL5tke4Pnpja7X4")
        let logout = try restdemo(["logout"])
        XCTAssertEqual(logout.status, 0, logout.stderr)
        XCTAssertEqual(logout.stdout, "logged out\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: tokenFile.path))
        XCTAssertEqual(try restdemo(["user", "3"]).status, 0)
        XCTAssertNil(server.lastRequest(path: "/api/users/3")?.header("Authorization"))
    }

    /// The stored token and the API key go to the API's origin only: a download, upload, stream or event stream from
    /// another server gets neither (the manager's `baseURL` scopes the authenticator).
    func testTheStoredTokenAndTheAPIKeyGoOnlyToTheAPIsOrigin() throws {
        XCTAssertEqual(try restdemo(["login", "--email", "eve.holt@reqres.in", "--password", "cityslicka"]).status, 0)
        let other = MockServer()
        try other.start()
        defer { other.stop() }
        other.stub(path: "/file", response: .text("other"))
        other.stub(path: "/feed", response: MockServer.Response(status: 204))
        server.stub(path: "/file", response: .text("mine"))
        let target = scratch.appendingPathComponent("file.txt")
        let otherFile = other.baseURL.absoluteString + "/file"
        for arguments in [
            ["download", otherFile, "-o", target.path, "--quiet"], ["upload", target.path, otherFile, "--quiet"],
            ["stream", otherFile], ["events", other.baseURL.absoluteString + "/feed"]
        ] {
            let run = try restdemo(arguments)
            XCTAssertEqual(run.status, 0, run.stderr)
        }
        XCTAssertEqual(other.receivedRequests.count, 4)
        XCTAssertEqual(other.receivedRequests.compactMap { $0.header("Authorization") ?? $0.header("x-api-key") }, [])
        XCTAssertEqual(try restdemo(["stream", "/file"]).status, 0)
        XCTAssertEqual(server.lastRequest(path: "/file")?.header("Authorization"), "Bearer QpwL5tke4Pnpja7X4")
        XCTAssertEqual(server.lastRequest(path: "/file")?.header("x-api-key"), "reqres-free-v1")
    }

    func testARejectedStoredTokenSaysToLogInAgain() throws {
        XCTAssertEqual(try restdemo(["login", "--email", "eve.holt@reqres.in", "--password", "x"]).status, 0)
        server.stub(path: "/api/users/2", response: MockServer.Response(status: 401))
        let run = try restdemo(["user", "2"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(
            run.stderr,
            "restdemo: Authentication failed: the credential refresh failed: the stored token was rejected; log in again (restdemo login).\n")
    }

    func testVerboseLoginNeverPrintsThePassword() throws {
        let run = try restdemo(["--verbose", "login", "--email", "eve.holt@reqres.in", "--password", "cityslicka"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains(#""password":"<redacted>""#), run.stderr)
        XCTAssertFalse(run.stdout.contains("cityslicka") || run.stderr.contains("cityslicka"), run.stderr)
        let sent = server.lastRequest(path: "/api/login").map { String(decoding: $0.body, as: UTF8.self) } ?? ""
        XCTAssertTrue(sent.contains("cityslicka"), "the server still got it: \(sent)")
    }

    func testRetriesAndVerboseEvents() throws {
        server.enqueue(MockServer.Response(status: 503))
        let run = try restdemo(["--retries", "2", "--verbose", "user", "2"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let events = run.stderr.split(separator: "\n").filter { $0.hasPrefix("· ") }
        XCTAssertEqual(events.count, 4, run.stderr)
        guard events.count == 4 else { return }  // never index past the end: a crash would end the whole test run
        XCTAssertTrue(events[1].hasPrefix("· retrying GET \(server.baseURL.absoluteString)/api/users/2 after attempt 1 in "), run.stderr)
        XCTAssertTrue(events[1].hasSuffix(" s: HTTP 503"), run.stderr)
        XCTAssertTrue(events[3].hasPrefix("· finished GET \(server.baseURL.absoluteString)/api/users/2 HTTP 200 in "), run.stderr)
        XCTAssertEqual(server.receivedRequests.filter { $0.path == "/api/users/2" }.count, 2)
        try assertUsageError(["--retries", "11", "users"], mentions: "--retries must be a whole number from 0 to 10, not '11'")
        try assertUsageError(["--retries", "-1", "users"], mentions: "--retries must be a whole number from 0 to 10, not '-1'")
    }

    func testCompletionScriptsForBashZshAndFishNameEveryCommand() throws {
        let commands = ["users", "user", "create", "update", "delete", "login", "logout", "register", "avatar", "tour", "serve", "completion"]
        for (shell, marker) in [("bash", "complete -F _restdemo restdemo"), ("zsh", "#compdef restdemo"), ("fish", "complete -c restdemo -f")] {
            let run = try restdemo(["completion", shell], useServer: false)
            XCTAssertEqual(run.status, 0, shell)
            XCTAssertTrue(run.stdout.contains(marker), shell)
            for command in commands { XCTAssertTrue(run.stdout.contains(command), "\(shell): \(command)") }
            XCTAssertTrue(run.stdout.contains("per-page") && run.stdout.contains("retries"), shell)
        }
        let bash = try restdemo(["completion", "bash"], useServer: false)
        let script = scratch.appendingPathComponent("restdemo.bash")
        try Data(bash.stdout.utf8).write(to: script)
        let check = try ChildProcess(
            path: "/bin/bash", arguments: ["-n", script.path], environment: [:],
            stdoutPath: "/dev/null", stderrPath: scratch.appendingPathComponent("bash-n").path)
        XCTAssertEqual(check.waitForExit().status, 0, ChildProcess.readFile(scratch.appendingPathComponent("bash-n").path))
        try assertUsageError(["completion", "tcsh"], mentions: "SHELL must be bash, zsh or fish, not 'tcsh'")
        for command in commands {
            let help = try restdemo([command, "--help"], useServer: false)
            XCTAssertTrue(help.stdout.contains("\n\nExample:\n  restdemo "), command)
        }
    }

    func testBadBaseURLIsAUsageError() throws {
        for base in ["ftp://x", "http://h:99999", "http://h:0"] {
            let run = try restdemo(["--base-url", base, "users"], useServer: false)
            XCTAssertEqual(run.status, 64, base)
            XCTAssertEqual(
                run.stderr, "restdemo: --base-url needs an http(s) URL such as https://reqres.in, not '\(base)' (see 'restdemo --help')\n")
        }
    }

    func testUnreachableServerExits69AndSuggestsOffline() throws {
        let url = "http://127.0.0.1:\(server.port)"
        server.stop()
        let run = try restdemo(["users"], useServer: false, environment: ["RESTDEMO_BASE_URL": url])
        XCTAssertEqual(run.status, 69)
        XCTAssertTrue(run.stderr.hasPrefix("restdemo: cannot reach \(url)/api/users: "), run.stderr)
        XCTAssertTrue(run.stderr.contains("--offline"))
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1)
    }

    func testTimeoutOptionBoundsEachRequest() throws {
        let started = Date()
        let run = try restdemo(["--base-url", server.baseURL.absoluteString + "/_test/hang", "--timeout", "0.5", "users"], useServer: false)
        XCTAssertEqual(run.status, 69, "crashed: \(run.crashed), stderr: \(run.stderr)")
        let called = server.baseURL.absoluteString + "/_test/hang/api/users"
        XCTAssertEqual(run.stderr, "restdemo: \(called): timed out after 0.5 s (raise --timeout to wait longer)\n")
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
    }

    func testAnswerThatDoesNotDecodeExits65() throws {
        let run = try restdemo(["--base-url", server.baseURL.absoluteString + "/_test/status/200", "user", "2"], useServer: false)
        XCTAssertEqual(run.status, 65)
        XCTAssertTrue(run.stderr.hasPrefix("restdemo: the answer does not decode as SingleUser"), run.stderr)
    }

    func testOfflineUsesTheBuiltInMock() throws {
        let run = try restdemo(["--offline", "users", "--page", "2"], useServer: false)
        XCTAssertEqual(run.status, 0)
        XCTAssertTrue(run.stdout.hasSuffix("page 2 of 2, 12 users\n"))
        XCTAssertTrue(server.receivedRequests.isEmpty, "the test's own server was not used")
    }

    func testHelpAndVersion() throws {
        let help = try restdemo(["--help"], useServer: false)
        XCTAssertEqual(help.status, 0)
        for command in ["users", "user", "create", "update", "delete", "login", "register", "avatar", "tour", "serve"] {
            XCTAssertTrue(help.stdout.contains("\n  \(command) "), command)
        }
        let commandHelp = try restdemo(["users", "--help"], useServer: false)
        XCTAssertTrue(commandHelp.stdout.hasPrefix("usage: restdemo users [--page N | --all] [--per-page N] [--headers]"))
        XCTAssertEqual(try restdemo(["--version"], useServer: false).stdout, "restdemo 3.0.0 (RestManager 3.0.0)\n")
    }

    func testServeWithStubsAnswersFromTheFile() throws {
        let stubs = scratch.appendingPathComponent("stubs.json")
        try Data([0xFF, 0xD8, 0xFF]).write(to: scratch.appendingPathComponent("tiny.jpg"))
        try Data(
            """
            [
              {"method": "GET", "path": "/v1/users/*", "status": 200, "headers": {"X-Fixture": "yes"}, "body": {"id": 1, "name": "Ann"}},
              {"path": "/v1/avatar", "bodyFile": "tiny.jpg", "headers": {"Content-Type": "image/jpeg"}},
              {"path": "/v1/hello", "body": "hi there", "status": 201}
            ]
            """.utf8
        ).write(to: stubs)
        let (child, base, finished, outcome) = try startServe(["serve", "--stubs", stubs.path], expecting: "with 3 stubs")
        var results = send(.get, "/v1/users/7", using: nil, base: base)
        XCTAssertEqual(results.data, Data(#"{"id":1,"name":"Ann"}"#.utf8))
        XCTAssertEqual(results.response?.headers.value(forKey: "X-Fixture"), "yes")
        XCTAssertEqual(results.response?.headers.value(forKey: "Content-Type"), "application/json; charset=utf-8")
        results = send(.get, "/v1/avatar", using: nil, base: base)
        XCTAssertEqual(results.data, Data([0xFF, 0xD8, 0xFF]))
        results = send(.post, "/v1/hello", using: nil, base: base)
        XCTAssertEqual(results.statusCode, 201)
        XCTAssertEqual(results.data, Data("hi there".utf8))
        XCTAssertEqual(send(.get, "/api/users/2", using: nil, base: base).statusCode, 200, "reqres still answers")
        child.interrupt()
        wait(for: [finished], timeout: 10)
        XCTAssertEqual(outcome.value?.status, 0)
    }

    func testAMalformedStubsFileIsRefusedWithItsLineAndReason() throws {
        let cases: [(String, String)] = [
            ("[\n  {\"path\": \"/a\"},\n  {\"path\": x}\n]", "stubs.json:3: not valid JSON"),
            ("{\"path\": \"/a\"}", "stubs.json:1: the file must be a JSON array of stubs"),
            (
                "[\n  {\"path\": \"/a\"},\n\n  {\"path\": \"/b\", \"fault\": \"explode\"}\n]",
                "stubs.json:4: stub 2: unknown fault 'explode' (one of closeWithoutResponse, closeAfterHeaders, closeMidBody, resetConnection, noResponse)"
            ),
            ("[{\"path\": \"a\"}]", "stubs.json:1: stub 1: 'path' must be a string starting with /"),
            ("[{\"path\": \"/a\", \"status\": 1000}]", "stubs.json:1: stub 1: 'status' must be from 100 to 599, not 1000"),
            ("[{\"path\": \"/a\", \"headers\": {\"Bad Name\": \"v\"}}]", "stubs.json:1: stub 1: header name 'Bad Name' is not a valid token"),
            ("[{\"path\": \"/a\", \"headers\": {\"X\": \"a\\r\\nb\"}}]", "stubs.json:1: stub 1: the value of header 'X' contains CR, LF or NUL"),
            ("[{\"path\": \"/a\", \"colour\": 1}]", "stubs.json:1: stub 1: unknown key 'colour'"),
            ("[{\"path\": \"/a\", \"delay\": \"soon\"}]", "stubs.json:1: stub 1: 'delay' must be a number"),
            ("[{\"path\": \"/a\", \"bodyFile\": \"missing.bin\"}]", "stubs.json:1: stub 1: cannot read bodyFile")
        ]
        let file = scratch.appendingPathComponent("stubs.json")
        for (text, message) in cases {
            try Data(text.utf8).write(to: file)
            let run = try restdemo(["serve", "--stubs", file.path], useServer: false)
            XCTAssertEqual(run.status, 65, text)
            XCTAssertTrue(run.stderr.hasPrefix("restdemo: \(file.path.dropLast("stubs.json".count))\(message)"), "\(text)\n-> \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        }
        let missing = try restdemo(["serve", "--stubs", scratch.appendingPathComponent("nope.json").path], useServer: false)
        XCTAssertEqual(missing.status, 66)
    }

    /// Starts `restdemo serve …` and waits until it says it listens (and `expecting`); returns its URL.
    private func startServe(
        _ arguments: [String], expecting: String = "listening on"
    )
        throws -> (ChildProcess, String, XCTestExpectation, ResultBox<ChildProcess.Outcome>)
    {
        let binary = try XCTUnwrap(Self.restdemoBinary)
        let outPath = scratch.appendingPathComponent("serve-out-\(UUID().uuidString)").path
        let child = try ChildProcess(
            path: binary.path, arguments: arguments, environment: ProcessInfo.processInfo.environment,
            stdoutPath: outPath, stderrPath: "/dev/null")
        let finished = expectation(description: "serve stopped")
        let outcome = ResultBox<ChildProcess.Outcome>()
        DispatchQueue.global().async {
            outcome.set(child.waitForExit()); finished.fulfill()
        }
        let listening = expectation(for: NSPredicate { _, _ in ChildProcess.readFile(outPath).contains("listening on") }, evaluatedWith: nil)
        wait(for: [listening], timeout: 30)
        let firstLine = ChildProcess.readFile(outPath)
        XCTAssertTrue(firstLine.contains(expecting), firstLine)
        let base = try XCTUnwrap(firstLine.range(of: #"http://127\.0\.0\.1:\d+"#, options: .regularExpression).map { String(firstLine[$0]) })
        return (child, base, finished, outcome)
    }

    func testServeRunsUntilInterrupted() throws {
        let (child, base, finished, outcome) = try startServe(["serve", "--page-size", "3"])
        let done = expectation(description: "request to serve")
        let box = ResultBox<Data?>()
        rest.getData(fromURL: URL(string: base + "/api/users")!) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 10)
        XCTAssertTrue(String(decoding: (box.value ?? nil) ?? Data(), as: UTF8.self).contains(#""per_page":3"#))
        child.interrupt()
        wait(for: [finished], timeout: 10)
        XCTAssertEqual(outcome.value?.status, 0)
    }
}

/// `restdemo users --cache`: the second request revalidates, and --verbose says 304.
final class RestDemoCacheTests: MockServerTestCase {
    func testTheSecondRequestRevalidatesWithA304() throws {
        let run = try restdemo(["--verbose", "users", "--page", "2", "--cache"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("\n< HTTP 304 Not Modified: the cached answer, in "), run.stderr)
        let pages = server.receivedRequests.filter { $0.target == "/api/users?page=2" }
        XCTAssertEqual(pages.count, 2)
        XCTAssertNil(pages.first?.header("If-None-Match"))
        XCTAssertTrue(pages.last?.header("If-None-Match")?.hasPrefix("\"") ?? false)
        XCTAssertTrue(run.stdout.hasSuffix("page 2 of 2, 12 users\n"), run.stdout)
    }
}
