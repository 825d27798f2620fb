"""grit_client - report a Python training job's progress to `grit launch`.

Standard library only, one module: copy it next to your trainer or put this directory on
PYTHONPATH. It speaks grit's heartbeat line protocol (docs/heartbeat.md):

    HB1 <secret> rank=R node=N step=S loss=L gnorm=G step_time=T comm_time=C pid=P host=H [tokens=K]
        [util=U] [net_rx=B net_tx=B] [gpu_util=G sm_clock=K]
    EV1 <secret> rank=R node=N kind=K step=S detail=D

as UDP datagrams to GRIT_SUP_ADDR, authenticated with the job's GRIT_SUP_SECRET. With
those in the environment the supervisor sees every step (hang detection from step progress,
stragglers from compute time, NaN and loss spikes), knows each rank's PID (a dead rank is
noticed at once), and a rank that calls done() may exit without being counted as a failure.

    import grit_client as grit
    start = grit.latest_checkpoint("ckpt")           # None, or (step, path)
    ...
    grit.beat(step, loss=loss, step_time=dt, comm_time=comm)
    grit.save_checkpoint(state, "ckpt", step)        # temp + fsync + rename + fsync dir
    grit.done()

Guarantees, so that the client can never hurt training:
- not supervised (no GRIT_SUP_ADDR/GRIT_SUP_SECRET): every call returns at once (one global
  check) and nothing is sent, printed or started;
- supervised: sends never block (non-blocking UDP) and never raise: a supervisor that is down
  or gone costs one failed sendto per call;
- a daemon thread repeats the last beat every `period` seconds (1 s), so a long step, a
  checkpoint save or a slow data loader is not mistaken for a dead rank; it is a daemon, so it
  never keeps the process alive;
- the secret is never printed, logged, put in an exception or shown by repr().

Silent-slowdown signals (docs/heartbeat.md): the same thread measures util=, the CPU time
the process used (time.process_time(): all its threads, torch's included) per second of
wall time since its previous beat; on the node's local rank 0 (LOCAL_RANK,
OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID; 0 when none is set) it also reads the interface
byte counters in /sys/class/net (all but lo, or GRIT_NET_IFACE) every 0.1 s and sends the
peak rates as net_rx=/net_tx=, and, where NVML loads (ctypes; GRIT_NVML_LIB, else
libnvidia-ml.so.1), samples the node's GPUs (CUDA_VISIBLE_DEVICES's, else all) before each
beat: gpu_util= the mean busy share (0..1), sm_clock= the lowest SM clock / maximum SM clock.
No NVML, no GPU: no GPU fields. All ride on every beat sent after they were measured.

Rank and node come from the environment: the rank from RANK (torchrun, torch env://), else
OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID; the node from GRIT_NODES and
GRIT_RANKS_PER_NODE (rank r runs on GRIT_NODES[r // R], the supervisor's own mapping), else
SLURMD_NODENAME, else the host name. Call init() to pass them explicitly.

Checkpoints: save_checkpoint() writes `step_<N>.pt` (torch.save) through a temp file that is
fsynced and renamed, then fsyncs the directory, and keeps the last `keep`; latest_checkpoint()
returns the newest complete one. A crash at any point of a save leaves either the previous
checkpoint as the newest or the new one complete, never a half file that looks complete.
"""

import atexit
import ctypes
import os
import re
import signal
import socket
import sys
import threading
import time

__all__ = ["init", "enabled", "rank", "node", "beat", "event", "checkpoint_saved",
           "checkpoint_loaded", "done", "close", "save_checkpoint", "latest_checkpoint",
           "list_checkpoints"]

PERIOD = 1.0  # seconds between liveness beats (grit's C client: 1 s)
NET_SLICE_S = 0.1  # seconds between two reads of the interface counters (hb.h HB_NET_SLICE_S)

_lock = threading.Lock()
_client = None       # the _Client when supervised
_checked = False     # the environment was read (once)


def _word(text, cap):
    """A protocol field value: one word (no spaces, '=' allowed), at most cap characters."""
    w = re.sub(r"\s+", "_", str(text)).strip("_") or "-"
    return w[:cap]


def _env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return None


def _host_id():
    v = os.environ.get("GRIT_HOST_ID")
    if v:
        return _word(v, 63)
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return _word(f.read().strip(), 63)
    except OSError:
        return _word(socket.gethostname(), 63)


def _default_rank():
    r = _env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
    return r if r is not None else 0


def _default_node(rank):
    nodes = [n for n in os.environ.get("GRIT_NODES", "").split(",") if n]
    rpn = _env_int("GRIT_RANKS_PER_NODE") or 1
    if nodes and 0 <= rank // rpn < len(nodes):
        return nodes[rank // rpn]
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0] or "-"


def _fmt(x):
    """A float field as grit's parser reads it (strtod: nan, inf and 1e-05 all parse)."""
    return "%.9g" % float(x)


class _Gpus:
    """The node's GPUs through NVML (ctypes), for gpu_util= and sm_clock=; see
    src/heartbeat/hb_gpu.h, which the C trainer uses. open() returns None when there is
    nothing to sample; sample() never raises."""

    class _Util(ctypes.Structure):  # nvmlUtilization_t
        _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

    SM = 1  # NVML_CLOCK_SM

    @classmethod
    def open(cls):
        try:
            lib = ctypes.CDLL(os.environ.get("GRIT_NVML_LIB") or "libnvidia-ml.so.1")
            init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
            if init() != 0:
                return None
        except (OSError, AttributeError):
            return None
        g = cls()
        g._lib, g._devs, g._max = lib, [], []
        try:
            cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
            if cvd is None:
                n = ctypes.c_uint(0)
                count = getattr(lib, "nvmlDeviceGetCount_v2", None) or lib.nvmlDeviceGetCount
                names = [str(i) for i in range(n.value)] if count(ctypes.byref(n)) == 0 else []
            else:
                names = [e.strip() for e in cvd.split(",")]
            by_index = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or lib.nvmlDeviceGetHandleByIndex
            for e in names:  # CUDA's rule: up to the first entry that names no device
                h = ctypes.c_void_p()
                if e.isdigit():
                    rc = by_index(ctypes.c_uint(int(e)), ctypes.byref(h))
                else:
                    rc = lib.nvmlDeviceGetHandleByUUID(e.encode(), ctypes.byref(h)) if e else 1
                if rc != 0:
                    break
                m = ctypes.c_uint(0)
                try:
                    ok = lib.nvmlDeviceGetMaxClockInfo(h, ctypes.c_int(cls.SM), ctypes.byref(m)) == 0
                except AttributeError:
                    ok = False
                g._devs.append(h)
                g._max.append(m.value if ok else 0)
        except (OSError, AttributeError, ValueError):
            g._devs = []
        if not g._devs:
            g.close()
            return None
        return g

    def sample(self):
        """(gpu_util, sm_clock), each None when no GPU answered."""
        utils, clock = [], None
        for h, mx in zip(self._devs, self._max):
            try:
                u = self._Util()
                if self._lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(u)) == 0 and u.gpu <= 100:
                    utils.append(u.gpu / 100.0)
            except (OSError, AttributeError):
                pass
            try:
                c = ctypes.c_uint(0)
                if mx and self._lib.nvmlDeviceGetClockInfo(h, ctypes.c_int(self.SM), ctypes.byref(c)) == 0:
                    r = min(1.0, c.value / mx)
                    clock = r if clock is None else min(clock, r)
            except (OSError, AttributeError):
                pass
        return (sum(utils) / len(utils) if utils else None), clock

    def close(self):
        try:
            self._lib.nvmlShutdown()
        except (OSError, AttributeError):
            pass


class _Client:
    """One supervised process's sender. Holds the secret only inside its line prefixes."""

    def __init__(self, addr, secret, rank, node, period):
        host, _, port = addr.rpartition(":")
        socket.inet_pton(socket.AF_INET, host)  # IPv4 dotted quad, as the supervisor binds: no DNS lookup
        self._to = (host, int(port))
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        self.rank, self.node = rank, node
        self._hb = "HB1 %s rank=%d node=%s" % (secret, rank, node)
        self._ev = "EV1 %s rank=%d node=%s" % (secret, rank, node)
        self._host = _host_id()
        self._last = None  # the last HB1 line (bytes), repeated by the liveness thread
        self._period = period
        self._wake = threading.Event()
        self._quit = False
        self.sent = self.failed = 0
        self._faults = _parse_faults(rank, node)
        self._sig = b""  # " util=... net_rx=... net_tx=...", set by the liveness thread
        local = _env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
        self._net = local is None or local == 0
        iface = os.environ.get("GRIT_NET_IFACE", "")
        self._iface = iface if iface and "/" not in iface else ""
        self._set_beat(0, 0.0, float("nan"), 0.0, 0.0, None)  # alive, no step finished yet
        self._thread = threading.Thread(target=self._loop, name="grit-heartbeat", daemon=True)
        self._thread.start()

    def __repr__(self):
        return "<grit_client rank=%d node=%s to=%s:%d>" % (self.rank, self.node, *self._to)

    def _send(self, data):
        try:
            self._sock.sendto(data, self._to)
            self.sent += 1
        except OSError:  # EAGAIN, ECONNREFUSED from an earlier ICMP, no route: never raise
            self.failed += 1

    def _set_beat(self, step, loss, gnorm, step_time, comm_time, tokens):
        line = "%s step=%d loss=%s gnorm=%s step_time=%.6f comm_time=%.6f pid=%d host=%s" % (
            self._hb, step, _fmt(loss), _fmt(gnorm), step_time, comm_time, os.getpid(),
            self._host)
        if tokens is not None:
            line += " tokens=%d" % tokens
        self._last = line.encode()  # without the signals and the newline
        return self._last

    def beat(self, step, loss, gnorm, step_time, comm_time, tokens):
        self._send(self._set_beat(step, loss, gnorm, step_time, comm_time, tokens) + self._sig + b"\n")
        for kind, at, down in self._faults:
            if at == step:
                self.event("fault_" + kind, step, "injected")
                if down:
                    _mark_down(self.node)
                sys.stderr.write("grit_client: fault injection: %s after step %d\n" % (kind, step))
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)

    def event(self, kind, step, detail):
        line = "%s kind=%s step=%d detail=%s\n" % (self._ev, _word(kind, 31), step,
                                                   _word(detail, 63))
        self._send(line.encode())

    def _net_totals(self):
        """(rx, tx) bytes of the node's interfaces, or None when none can be read."""
        names = [self._iface] if self._iface else None
        try:
            if names is None:
                names = [n for n in os.listdir("/sys/class/net") if n != "lo"]
            rx = tx = 0
            for n in names:
                base = "/sys/class/net/%s/statistics/" % n
                with open(base + "rx_bytes") as f:
                    rx += int(f.read())
                with open(base + "tx_bytes") as f:
                    tx += int(f.read())
            return (rx, tx) if names else None
        except (OSError, ValueError):
            return None

    def _loop(self):
        cpu0, wall0 = time.process_time(), time.monotonic()
        next_beat = wall0 + self._period
        prev = (self._net_totals(), wall0) if self._net else (None, wall0)
        peak = None
        gpus = _Gpus.open() if self._net else None  # one sampler per node, as for the network
        while not self._quit:
            now = time.monotonic()
            self._wake.wait(min(NET_SLICE_S, max(0.0, next_beat - now)) if self._net
                            else max(0.0, next_beat - now))
            if self._quit:
                break
            now = time.monotonic()
            if self._net:
                cur = self._net_totals()
                if cur is not None and prev[0] is not None and now - prev[1] > 1e-3:
                    r = ((cur[0] - prev[0][0]) / (now - prev[1]), (cur[1] - prev[0][1]) / (now - prev[1]))
                    if r[0] >= 0 and r[1] >= 0:
                        peak = r if peak is None else (max(peak[0], r[0]), max(peak[1], r[1]))
                prev = (cur, now)
            if now < next_beat:
                continue
            next_beat = now + self._period
            cpu = time.process_time()
            sig = " util=%.4f" % ((cpu - cpu0) / (now - wall0)) if now - wall0 > 0.05 else ""
            cpu0, wall0 = cpu, now
            if peak is not None:
                sig += " net_rx=%.0f net_tx=%.0f" % peak
                peak = (0.0, 0.0)
            if gpus is not None:
                gu, gk = gpus.sample()
                sig += (" gpu_util=%.4f" % gu if gu is not None else "") + (
                    " sm_clock=%.4f" % gk if gk is not None else "")
            self._sig = sig.encode()
            last = self._last
            if last is not None:
                self._send(last + self._sig + b"\n")
        if gpus is not None:
            gpus.close()

    def close(self):
        self._quit = True
        self._wake.set()
        try:
            self._sock.close()
        except OSError:
            pass


def _parse_faults(rank, node):
    """GRIT_FAULTS items kill/hang for this rank or node (grit launch --inject, for tests and
    demos): after beat(S) the process SIGKILLs or SIGSTOPs itself, as grit's trainer does.
    Other kinds need the trainer's cooperation and are ignored, saying so once."""
    out = []
    for item in filter(None, os.environ.get("GRIT_FAULTS", "").split(",")):
        kind, *kvs = item.split(":")
        mine, step = True, None
        for kv in kvs:
            k, _, v = kv.partition("=")
            if k == "rank":
                mine &= v == str(rank)
            elif k == "node":
                mine &= v == node
            elif k == "step" and v.isdigit():
                step = int(v)
        if not mine:
            continue
        if kind in ("kill", "hang") and step is not None:
            # a node-wide kill takes the node down: the marker its health check then sees
            # (GRIT_FAULT_NODE_DOWN, a path with {node}; docs/env.md), as grit's trainer does
            down = kind == "kill" and any(kv.startswith("node=") for kv in kvs)
            out.append((kind, step, down))
        else:
            sys.stderr.write("grit_client: GRIT_FAULTS item '%s' is not supported by the "
                             "Python client (kill and hang are), ignored\n" % item)
    return out


def _mark_down(node):
    """Creates node's down marker (GRIT_FAULT_NODE_DOWN with {node} replaced), if set."""
    pattern = os.environ.get("GRIT_FAULT_NODE_DOWN", "")
    if not pattern:
        return
    try:
        open(pattern.replace("{node}", node), "a").close()
    except OSError as e:
        sys.stderr.write("grit_client: fault injection: cannot create the down marker: %s\n" % e)


def init(rank=None, node=None, period=PERIOD):
    """Reads GRIT_SUP_ADDR and GRIT_SUP_SECRET once and starts the liveness thread.
    Returns True when supervised. Optional: the first beat()/event() calls it with the
    defaults. A malformed address disables the client with one line on stderr (the secret
    is never part of it)."""
    global _client, _checked
    with _lock:
        if _checked:
            return _client is not None
        _checked = True
        addr, secret = os.environ.get("GRIT_SUP_ADDR"), os.environ.get("GRIT_SUP_SECRET")
        if not addr or not secret:
            return False
        r = _default_rank() if rank is None else int(rank)
        n = _word(node if node is not None else _default_node(r), 63)
        if not re.fullmatch(r"[0-9A-Fa-f]{16,128}", secret):
            sys.stderr.write("grit_client: GRIT_SUP_SECRET is not a hex secret; not reporting\n")
            return False
        try:
            _client = _Client(addr, secret, r, n, period)
        except (OSError, ValueError):
            sys.stderr.write("grit_client: GRIT_SUP_ADDR '%s' is not IPv4 host:port; not "
                             "reporting\n" % addr)
            return False
        atexit.register(close)
        return True


def enabled():
    """True when this process reports to a supervisor."""
    return init()


def rank():
    """The rank this process reports as (None when not supervised)."""
    return _client.rank if init() else None


def node():
    """The node name this process reports as (None when not supervised)."""
    return _client.node if init() else None


def beat(step, loss=0.0, tokens=None, step_time=0.0, comm_time=0.0, gnorm=float("nan")):
    """Reports that optimiser step `step` (1-based: steps completed) finished.

    loss: this rank's loss (rank 0's is the series the spike detector watches; NaN or inf is
    a failure: the supervisor rolls back); None is sent as 0 (grit's parser reads a beat
    without loss= as NaN). step_time: the step's wall time in seconds; comm_time: the part spent
    waiting for other ranks (all-reduce), so that step_time - comm_time is this rank's
    compute time for the straggler detector. tokens: tokens processed so far (optional).
    """
    if not _checked:
        init()
    c = _client
    if c is None:
        return
    try:
        c.beat(int(step), 0.0 if loss is None else float(loss), float(gnorm), float(step_time), float(comm_time),
               None if tokens is None else int(tokens))
    except (TypeError, ValueError, OverflowError):
        pass  # a value that is not a number: drop the beat rather than raise into training


def event(kind, step, detail="-"):
    """Sends an EV1 event (one word kind and detail; spaces become '_'). Kinds the
    supervisor acts on: nan (roll back), done (see done()); all become worker_event lines
    in events.jsonl."""
    if not _checked:
        init()
    c = _client
    if c is not None:
        try:
            c.event(kind, int(step), detail)
        except (TypeError, ValueError, OverflowError):
            pass


def checkpoint_saved(step, path="-"):
    """Reports a committed checkpoint (event ckpt_saved, detail its file name)."""
    event("ckpt_saved", step, os.path.basename(str(path)))


def checkpoint_loaded(step, path="-"):
    """Reports a resume from a checkpoint (event ckpt_loaded, detail its file name)."""
    event("ckpt_loaded", step, os.path.basename(str(path)))


def validation(step, loss):
    """Reports a held-out (validation) loss from rank 0: the supervisor flags a spike against
    the last 16 values (event validation_spike, a warning in its log and summary; the run goes
    on). Other ranks' reports are ignored."""
    event("validation", step, "loss=%.9g" % float(loss))


def done(step=None):
    """This rank finished normally: one last beat, then the done event, so its exit is not a
    failure. Call it after the last checkpoint and before the process exits."""
    c = _client if init() else None
    if c is None:
        return
    if c._last is not None:
        c._send(c._last + c._sig + b"\n")
    m = re.search(rb" step=(\d+)", c._last or b"")
    c.event("done", step if step is not None else int(m.group(1)) if m else 0, "-")
    # the datagram can be lost (a flood fills the supervisor's socket); a local supervisor
    # also looks for this file when the process is gone
    mark = os.environ.get("GRIT_SUP_DONE_DIR")
    if mark:
        try:
            os.close(os.open(os.path.join(mark, "rank_%d" % c.rank), os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            pass


def close():
    """Stops the liveness thread (also at exit). Later calls are no-ops."""
    global _client
    with _lock:
        c, _client = _client, None
    if c is not None:
        c.close()


# --- checkpoints -----------------------------------------------------------------------

_CKPT_RE = re.compile(r"^step_(\d{8,})\.pt$")


class SupervisorGone(RuntimeError):
    """The grit launch that started this job is gone, or another one owns its run directory:
    save_checkpoint raises it instead of committing (docs/supervisor.md)."""


def supervisor_state():
    """"alive", "gone" (the grit launch that started this job died: nobody holds its
    RUN/supervisor.lock), "superseded" (another grit launch holds it) or "unknown" (not
    started by grit launch, or the lock file cannot be read on this node). The same rule as
    the C trainer (core/runlock.c): the lock first, then the token in the file."""
    import fcntl
    path, token = os.environ.get("GRIT_SUP_LOCK"), os.environ.get("GRIT_SUP_LOCK_TOKEN")
    if not path or not token:
        return "unknown"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return "unknown"
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            held = True
        except OSError:  # ENOLCK: a file system without locks
            return "unknown"
        text = os.pread(fd, 511, 0).decode("utf-8", "replace")
    finally:
        os.close(fd)
    ours = any(line == "token=" + token for line in text.splitlines())
    if held:
        return "alive" if ours else "superseded"
    return "gone" if ours else "unknown"


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_checkpoints(directory):
    """[(step, path)] of the complete checkpoints in directory, oldest first. Temp files of
    an interrupted save (.step_*.pt.tmp*) never match."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        m = _CKPT_RE.match(n)
        if m:
            p = os.path.join(directory, n)
            if os.path.isfile(p) and os.path.getsize(p) > 0:
                out.append((int(m.group(1)), p))
    return sorted(out)


def latest_checkpoint(directory):
    """(step, path) of the newest complete checkpoint in directory, or None."""
    cps = list_checkpoints(directory)
    return cps[-1] if cps else None


def save_checkpoint(obj, directory, step, keep=3, report=True):
    """Writes obj with torch.save as directory/step_<step:08d>.pt, durably and atomically:
    a temp file in the same directory, flush + fsync, rename over the final name, fsync the
    directory; then removes all but the newest `keep` checkpoints (keep <= 0 keeps all) and
    any temp file an earlier crash left. Reports checkpoint_saved. Returns the path.
    Call it on one rank (rank 0 for DDP, whose state is the same everywhere); errors
    (ENOSPC, EIO) raise, after removing the temp file: a failed save must not look done.
    A job whose grit launch is gone or superseded (supervisor_state) commits nothing: it
    raises SupervisorGone just before the rename, so ranks that outlive a killed supervisor
    never write into a run another one owns."""
    import torch  # only needed here: the rest of the module has no dependencies

    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, "step_%08d.pt" % step)
    tmp = os.path.join(directory, ".step_%08d.pt.tmp%d" % (step, os.getpid()))
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        state = supervisor_state()
        if state in ("gone", "superseded"):
            raise SupervisorGone("%s not committed: the grit launch that started this job is %s "
                                 "(%s)" % (final, state, os.environ.get("GRIT_SUP_LOCK")))
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    if keep > 0:
        for _, p in list_checkpoints(directory)[:-keep]:
            os.unlink(p)
    for n in os.listdir(directory):
        if n.startswith(".step_") and ".pt.tmp" in n and not n.endswith("tmp%d" % os.getpid()):
            try:
                os.unlink(os.path.join(directory, n))
            except OSError:
                pass
    if report:
        checkpoint_saved(step, final)
    return final


# --- torchrun under grit launch -------------------------------------------------------

def torchrun_argv(args, env=None):
    """The torchrun command line for this node slot of a `grit launch` job.

    grit launch's local backend starts nodes x ranks-per-node processes with mpirun (the
    Slurm backend with srun); torchrun wants one agent per node that starts the node's
    ranks itself. Process k (OMPI_COMM_WORLD_RANK, PMIX_RANK or SLURM_PROCID) belongs to
    node k // R (R = GRIT_RANKS_PER_NODE, the supervisor's mapping); the first process of
    each node runs torchrun --nnodes N --node_rank k // R --nproc_per_node R (N = the
    entries of GRIT_NODES), so torchrun's RANK r is on grit's node r // R as well. The others
    have nothing to do: None. Options already in args are kept; --master_addr defaults to
    MASTER_ADDR or 127.0.0.1, --master_port to MASTER_PORT or 29500, --max_restarts to 0
    (restarting is the supervisor's job, with health checks and spares), --monitor_interval
    to 0.5 s (torchrun's default 5 s keeps a finished job alive that long)."""
    env = os.environ if env is None else env
    k = None
    for n in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
        if (env.get(n) or "").isdigit():
            k = int(env[n])
            break
    nodes = [n for n in env.get("GRIT_NODES", "").split(",") if n]
    rpn = int(env.get("GRIT_RANKS_PER_NODE") or 1)
    if k is None or not nodes:
        raise ValueError("not started by grit launch (no GRIT_NODES or launcher rank in the "
                         "environment); run torchrun directly")
    if k % rpn:
        return None
    have = {a.split("=")[0] for a in args if a.startswith("--")}
    # torch >= 2 spells the options with dashes and still accepts underscores
    def has(name):
        return name in have or name.replace("_", "-") in have
    out = ["torchrun"]
    if not has("--nnodes"):
        out += ["--nnodes", str(len(nodes))]
    if not has("--node_rank"):
        out += ["--node_rank", str(k // rpn)]
    if not has("--nproc_per_node"):
        out += ["--nproc_per_node", str(rpn)]
    if not has("--master_addr"):
        out += ["--master_addr", env.get("MASTER_ADDR", "127.0.0.1")]
    if not has("--master_port"):
        out += ["--master_port", env.get("MASTER_PORT", "29500")]
    if not has("--max_restarts"):
        out += ["--max_restarts", "0"]
    if not has("--monitor_interval"):  # torchrun's 5 s would delay every exit by up to 5 s
        out += ["--monitor_interval", "0.5"]
    return out + list(args)


def _main(argv):
    if len(argv) < 2 or argv[1] != "torchrun" or argv[2:3] in (["-h"], ["--help"]):
        sys.stdout.write(
            "usage: python3 -m grit_client torchrun [TORCHRUN OPTIONS] SCRIPT [ARGS...]\n\n"
            "Inside `grit launch --nodes N --ranks-per-node R -- ...`: runs one torchrun per\n"
            "node slot (--nnodes N --node_rank K --nproc_per_node R --max_restarts 0, master\n"
            "127.0.0.1:29500 unless MASTER_ADDR/MASTER_PORT or the options say otherwise), so\n"
            "that torchrun's rank r runs on grit's node r // R. See docs/pytorch.md.\n")
        return 0 if argv[2:3] in (["-h"], ["--help"]) else 2
    try:
        cmd = torchrun_argv(argv[2:])
    except ValueError as e:
        sys.stderr.write("grit_client torchrun: %s\n" % e)
        return 2
    if cmd is None:
        return 0
    return _torchrun(cmd[1:])


def _torchrun(args):
    """torchrun's main in this process (the agent imports torch either way), working around
    torch 1.13 on Python >= 3.11 (Debian 12's python3-torch), whose torchrun fails at start
    ('NoneType' object has no attribute 'get'): Std.from_str("0") finds no member, because
    Python 3.11 no longer iterates a flag enum's zero value."""
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing import api

    if api.Std.from_str("0") is None:
        orig = api.Std.from_str

        def from_str(vm):
            if re.fullmatch(r"[0123]", vm):
                return api.Std(int(vm))
            m = orig(vm)
            return {k: (api.Std.NONE if v is None else v) for k, v in m.items()}

        api.Std.from_str = from_str
    sys.argv = ["torchrun"] + list(args)
    run.main(list(args))
    return 0

if __name__ == "__main__":
    sys.exit(_main(sys.argv))
