#!/usr/bin/env python3
"""s3_fault_proxy.py UPSTREAM_PORT PORTFILE [--fail-parts N:STATUS,...] [--kill-at-part N:PIDFILE]
                   [--log-gets FILE]

A fault-injecting HTTP proxy on 127.0.0.1 in front of the local S3 server (tests only).
It relays every request unchanged (the Host header too, so SigV4 signatures still
verify upstream) and writes the port it listens on to PORTFILE.

  --fail-parts 2:503,4:500   the first attempt at multipart part 2 gets 503 SlowDown,
                             part 4 gets 500 InternalError (the body is read first)
  --kill-at-part 3:PIDFILE   when part 3 arrives, SIGKILL the process in PIDFILE (the
                             S3 server) and drop this connection: the server died mid-upload
  --log-gets FILE            one line per GET of an object that succeeded: "PATH BYTES"
                             (the bytes relayed; a test adds them up per object)
Counts of what it did go to stderr ("fault: ...") for the test to check.
"""
import http.client
import http.server
import os
import signal
import sys
import threading
import urllib.parse

upstream = int(sys.argv[1])
portfile = sys.argv[2]
fail_parts, kill_part, kill_pidfile, gets_log = {}, None, None, None
args = sys.argv[3:]
while args:
    a = args.pop(0)
    if a == "--fail-parts":
        for item in args.pop(0).split(","):
            n, st = item.split(":")
            fail_parts[n] = int(st)
    elif a == "--kill-at-part":
        n, kill_pidfile = args.pop(0).split(":", 1)
        kill_part = n
    elif a == "--log-gets":
        gets_log = args.pop(0)
    else:
        sys.exit("s3_fault_proxy: unknown argument " + a)
lock = threading.Lock()
failed_once = set()


class Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def relay(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        part = q.get("partNumber", [None])[0]
        if part is not None and self.command == "PUT":
            with lock:
                first = part not in failed_once
                failed_once.add(part)
            if part == kill_part and first:
                pid = int(open(kill_pidfile).read())
                os.kill(pid, signal.SIGKILL)
                print(f"fault: killed server {pid} at part {part}", file=sys.stderr, flush=True)
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if part in fail_parts and first:
                st = fail_parts[part]
                code = "SlowDown" if st == 503 else "InternalError"
                msg = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
                print(f"fault: {st} for part {part}", file=sys.stderr, flush=True)
                self.send_response(st)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(msg)))
                self.end_headers()
                self.wfile.write(msg)
                return
        try:
            c = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
            hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("expect", "connection")}
            c.request(self.command, self.path, body=body if n or self.command in ("PUT", "POST") else None,
                      headers=hdrs)
            r = c.getresponse()
            data = r.read()
        except OSError:
            self.close_connection = True
            self.connection.shutdown(2)  # upstream is gone: so is this connection
            return
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        # HEAD: the object's length as upstream gave it (the body is empty)
        length = r.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        c.close()
        path = urllib.parse.urlsplit(self.path)
        if gets_log and self.command == "GET" and not path.query and r.status in (200, 206):
            with lock, open(gets_log, "a") as f:
                f.write(f"{path.path} {len(data)}\n")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
srv.daemon_threads = True
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
