"""The loopback server for Tests/AppTarget/main.swift: fixed answers, one route each. Prints its port, then serves
until killed. /cached/NAME answers its second request with a different body, so a cache hit shows as the first one."""
import http.server, sys, threading

served = {}
lock = threading.Lock()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body, content_type="application/json", extra=()):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/users":
            self.answer(b'[{"id":1,"name":"Ada"},{"id":2,"name":"Grace"}]')
        elif self.path == "/users/1":
            self.answer(b'{"id":1,"name":"Ada"}')
        elif self.path == "/lines":
            self.answer(b"one\ntwo\nthree\n", "text/plain")
        elif self.path == "/events":
            # 204 after the events: the stream is over and is not reconnected.
            if self.headers.get("Last-Event-ID"):
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.answer(b"id: 1\ndata: first\n\nid: 2\nevent: update\ndata: second\n\n", "text/event-stream",
                        [("Connection", "close")])
            self.close_connection = True
        elif self.path.startswith("/cached/"):
            with lock:
                served[self.path] = served.get(self.path, 0) + 1
                n = served[self.path]
            self.answer(b"v%d" % n, "text/plain", [("Cache-Control", "max-age=600"), ("ETag", '"v%d"' % n)])
        elif self.path == "/download":
            self.answer(bytes(i % 251 for i in range(300000)), "application/octet-stream")
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
