#!/usr/bin/env python3
"""tb_decode.py RUN_DIR - an independent reader of TensorBoard event files (stdlib only).

Reads every RUN_DIR/tb/events.out.tfevents.* file: TFRecord framing (u64 length, masked
CRC32C of the length, data, masked CRC32C of the data), each record a tensorflow.Event
protobuf decoded from the wire format by hand. Checks: every CRC, the first event of each
file is file_version "brain.Event:2", every scalar event has wall_time, step and one
summary value with a tag and simple_value; and the last value of each (tag, step), in
TensorBoard's reading order, equals float32 of the metrics.jsonl number for that step
(train/loss, train/grad_norm, train/lr, train/tokens_per_s; val/loss and val/perplexity
at the steps that have val_loss / val_ppl), every step of metrics.jsonl
being present for every tag (loss, grad norm and lr, which are deterministic, must also
agree in the copies a resumed run wrote twice).
Exit 0 when all hold; else prints the first problems and exits 1.
"""
import glob, json, os, struct, sys

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]; i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7

def fields(buf):
    """(field number, wire type, value) of one protobuf message."""
    i, out = 0, []
    while i < len(buf):
        key, i = varint(buf, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v = buf[i:i + 8]; i += 8
        elif wt == 5:
            v = buf[i:i + 4]; i += 4
        elif wt == 2:
            n, i = varint(buf, i)
            v = buf[i:i + n]; i += n
        else:
            raise ValueError("unsupported wire type %d" % wt)
        if i > len(buf):
            raise ValueError("field %d runs past the message" % f)
        out.append((f, wt, v))
    return out

def records(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError("%s: truncated record header at byte %d" % (path, i))
        n, = struct.unpack_from("<Q", data, i)
        lcrc, = struct.unpack_from("<I", data, i + 8)
        if lcrc != masked(data[i:i + 8]):
            raise ValueError("%s: length CRC mismatch at byte %d" % (path, i))
        body = data[i + 12:i + 12 + n]
        if len(body) != n or i + 16 + n > len(data):
            raise ValueError("%s: truncated record at byte %d" % (path, i))
        dcrc, = struct.unpack_from("<I", data, i + 12 + n)
        if dcrc != masked(body):
            raise ValueError("%s: data CRC mismatch at byte %d" % (path, i))
        yield body
        i += 16 + n

def event(body):
    ev = {"summary": []}
    for f, wt, v in fields(body):
        if f == 1 and wt == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif f == 2 and wt == 0:
            ev["step"] = v
        elif f == 3 and wt == 2:
            ev["file_version"] = v.decode()
        elif f == 5 and wt == 2:
            for sf, swt, sv in fields(v):
                if sf == 1 and swt == 2:
                    val = {}
                    for vf, vwt, vv in fields(sv):
                        if vf == 1 and vwt == 2:
                            val["tag"] = vv.decode()
                        elif vf == 2 and vwt == 5:
                            val["simple_value"] = struct.unpack("<f", vv)[0]
                    ev["summary"].append(val)
    return ev

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]

def main(run):
    want = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            for tag, key in (("train/loss", "loss"), ("train/grad_norm", "grad_norm"),
                             ("train/lr", "lr"), ("train/tokens_per_s", "tokens_per_s")):
                want[(tag, m["step"])] = f32(m[key])
            for tag, key in (("val/loss", "val_loss"), ("val/perplexity", "val_ppl")):
                if key in m:  # validation steps only (src/train/validate.h)
                    want[(tag, m["step"])] = f32(m[key])
    files = sorted(glob.glob(os.path.join(run, "tb", "events.out.tfevents.*")))
    if not files:
        print("no event files in %s/tb" % run); return 1
    # TensorBoard reads the files in name order, and a file that goes back in steps (a
    # resumed run) replaces the steps from there on: the last value of each (tag, step)
    # is what it shows. The deterministic scalars must agree in every copy; throughput
    # (a timing) only in the last.
    problems, last, nscalars = [], {}, 0
    for path in files:
        try:
            evs = [event(b) for b in records(path)]
        except ValueError as e:
            print(e); return 1
        if not evs or evs[0].get("file_version") != "brain.Event:2":
            problems.append("%s: first event is not file_version brain.Event:2" % path)
        for ev in evs[1:]:
            if "wall_time" not in ev or "step" not in ev or len(ev["summary"]) != 1:
                problems.append("%s: malformed scalar event %r" % (path, ev)); continue
            v = ev["summary"][0]
            key = (v.get("tag"), ev["step"])
            nscalars += 1
            if key not in want:
                problems.append("%s: %s step %d is not in metrics.jsonl" % (path, key[0], key[1]))
                continue
            last[key] = (path, v.get("simple_value"))
            if key[0] != "train/tokens_per_s" and v.get("simple_value") != want[key]:
                problems.append("%s: %s step %d: %r in the event file, %r in metrics.jsonl" %
                                (path, key[0], key[1], v.get("simple_value"), want[key]))
    for key, (path, got) in sorted(last.items()):
        if got != want[key]:
            problems.append("%s: %s step %d: %r is the last value, %r in metrics.jsonl" %
                            (path, key[0], key[1], got, want[key]))
    seen = set(last)
    missing = sorted(set(want) - seen)
    if missing:
        problems.append("%d scalars of metrics.jsonl missing from the event files, e.g. %r" %
                        (len(missing), missing[:3]))
    if problems:
        print("\n".join(problems[:10])); return 1
    print("ok   %d event files, %d scalars, all CRCs valid, every value equal to metrics.jsonl "
          "(%d step values)" % (len(files), nscalars, len(want)))
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
