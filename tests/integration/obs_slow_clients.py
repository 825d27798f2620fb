"""obs_slow_clients.py PORT - hostile clients against grit's dashboard server.

Opens 200 connections that trickle a request one byte every 0.5 s (each byte renews an
idle timeout, so a server with only an idle timeout keeps them for ever) and 100 that
connect and send nothing. While they are open, 20 normal GET requests must each be
answered within 2 s. Then every hostile connection must have been closed by the server
within its request deadline (5 s) plus slack. Exits 1 with the reason on failure."""
import socket
import sys
import time

port = int(sys.argv[1])
addr = ("127.0.0.1", port)
REQ = b"GET /dash.css HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 400 + b"\r\n\r\n"


def get(path):
    t = time.monotonic()
    s = socket.create_connection(addr, timeout=2)
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return data.split(b"\r\n", 1)[0], time.monotonic() - t


fails = []
trickle = []
for _ in range(200):
    s = socket.create_connection(addr, timeout=5)
    s.setblocking(False)
    trickle.append([s, 0])
silent = [socket.create_connection(addr, timeout=5) for _ in range(100)]
t0 = time.monotonic()
answered = 0
worst = 0.0
closed_at = {}
while time.monotonic() - t0 < 12:
    for i, (s, k) in enumerate(trickle):
        if i in closed_at:
            continue
        try:
            s.send(REQ[k:k + 1])
            trickle[i][1] = k + 1
            if s.recv(1) == b"":
                closed_at[i] = time.monotonic() - t0
        except BlockingIOError:
            pass
        except OSError:
            closed_at[i] = time.monotonic() - t0
    if answered < 20:
        try:
            status, dt = get(b"/dash.css")
            worst = max(worst, dt)
            if b" 200 " not in status + b" ":
                fails.append("normal request answered %r" % status)
            answered += 1
        except OSError as e:
            fails.append("a normal request failed while slow clients were connected: %s" % e)
            answered += 1
    time.sleep(0.5)
if worst > 2:
    fails.append("a normal request took %.2f s (limit 2 s)" % worst)
if len(closed_at) < len(trickle):
    fails.append("%d of %d trickling connections were still open after 12 s"
                 % (len(trickle) - len(closed_at), len(trickle)))
elif max(closed_at.values()) > 9:
    fails.append("a trickling connection was closed only after %.1f s" % max(closed_at.values()))
still = 0
for s in silent:
    s.settimeout(0.1)
    try:
        if s.recv(1) != b"":
            still += 1
    except socket.timeout:
        still += 1
    except OSError:
        pass
if still:
    fails.append("%d of %d silent connections were still open after 12 s" % (still, len(silent)))
print("normal requests: %d answered, slowest %.3f s; trickling connections closed after "
      "%.1f..%.1f s; silent ones open: %d"
      % (answered, worst, min(closed_at.values() or [0]), max(closed_at.values() or [0]), still))
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
