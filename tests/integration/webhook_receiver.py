"""webhook_receiver.py OUT PORTFILE [DELAY_S] - a local stand-in for a Slack-compatible webhook
(grit rate's tests): on 127.0.0.1, any free port (written to PORTFILE once listening, by
rename), it appends one line per POST to OUT, "Content-Type<TAB>body", and answers 200 after
DELAY_S seconds (default 0: a slow receiver when set)."""
import http.server
import os
import sys
import time

out, portfile = sys.argv[1], sys.argv[2]
delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0


class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(delay)
        with open(out, "ab") as f:
            f.write(self.headers.get("Content-Type", "").encode() + b"\t" + body + b"\n")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *a):
        pass


s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(portfile + ".tmp", "w").write(str(s.server_port))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
