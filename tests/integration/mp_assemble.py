"""mp_assemble.py - an independent reader of grit's model-parallel checkpoints (issue #17).

It knows only the format (docs/formats.md): manifest.json's files, each
model-tp<t>-of-<T>-pp<p>-of-<P>.safetensors entry with "tensors": {name: {shape, dim,
segs}}, and the safetensors bytes. It assembles every whole tensor (weights and AdamW
moments), checks that each index along the split dimension comes from exactly one shard
and that no shard holds a tensor the manifest does not place, and compares the result
with a one-rank checkpoint (model.safetensors + optimizer.safetensors or its optimiser
shards).

  mp_assemble.py MP_STEP_DIR REF_STEP_DIR [--bitwise | --rel R] [--layout TxP]

It always compares shapes (every reference tensor is assembled, nothing else); with
--bitwise also the bytes, with --rel each tensor's relative L2 difference (<= R).
--layout checks the files' layout. Exit 0 when all agree.
"""
import json
import re
import struct
import sys

import numpy as np

PAT = re.compile(r"model-tp(\d+)-of-(\d+)-pp(\d+)-of-(\d+)\.safetensors$")


def header(path):
    with open(path, "rb") as h:
        n = struct.unpack("<Q", h.read(8))[0]
        hd = json.loads(h.read(n))
    hd.pop("__metadata__", None)
    return hd, 8 + n


def read(path, hd, off, name):
    e = hd[name]
    assert e["dtype"] == "F32", (path, name, e["dtype"])
    b, t = e["data_offsets"]
    with open(path, "rb") as h:
        h.seek(off + b)
        return np.frombuffer(h.read(t - b), dtype="<f4").reshape(e["shape"])


def assemble(d):
    man = json.load(open(f"{d}/manifest.json"))
    shards = [f for f in man["files"] if PAT.match(f["name"])]
    if not shards:
        sys.exit(f"FAIL: {d}: no model-parallel shards in the manifest")
    layouts = {tuple(map(int, PAT.match(f["name"]).groups()[1::2])) for f in shards}
    out, cover = {}, {}
    for f in shards:
        path = f"{d}/{f['name']}"
        hd, off = header(path)
        for name in hd:  # nothing the manifest does not place
            base = re.sub(r"^exp_avg(_sq)?\.", "", name)
            if base not in f["tensors"]:
                sys.exit(f"FAIL: {path}: tensor {name} has no slice in the manifest")
        for base, sl in f["tensors"].items():
            for pre in ("", "exp_avg.", "exp_avg_sq."):
                name = pre + base
                if name not in hd:
                    sys.exit(f"FAIL: {path}: the manifest places {name}, the file lacks it")
                piece = read(path, hd, off, name)
                whole = out.setdefault(name, np.full(sl["shape"], np.nan, dtype="<f4"))
                cnt = cover.setdefault(name, np.zeros(sl["shape"], dtype=np.int32))
                dim = sl["dim"]
                if dim < 0:
                    whole[...] = piece
                    cnt[...] += 1
                    continue
                for g, l, c in sl["segs"]:
                    idx_w = [slice(None)] * len(sl["shape"])
                    idx_l = [slice(None)] * len(sl["shape"])
                    idx_w[dim], idx_l[dim] = slice(g, g + c), slice(l, l + c)
                    whole[tuple(idx_w)] = piece[tuple(idx_l)]
                    cnt[tuple(idx_w)] += 1
    for name, c in cover.items():
        if not (c == 1).all():
            sys.exit(f"FAIL: {d}: {name}: {(c == 0).sum()} elements in no shard, "
                     f"{(c > 1).sum()} in several")
    return out, layouts, sum(f["size"] for f in shards)


def reference(d):
    man = json.load(open(f"{d}/manifest.json"))
    names = [f["name"] for f in man["files"]]
    ref = {}
    hd, off = header(f"{d}/model.safetensors")
    for k in hd:
        ref[k] = read(f"{d}/model.safetensors", hd, off, k)
    if "optimizer.safetensors" in names:
        hd, off = header(f"{d}/optimizer.safetensors")
        for k in hd:
            ref[k] = read(f"{d}/optimizer.safetensors", hd, off, k)
    else:  # flat optimiser shards: the model's tensors back to back, model.safetensors order
        flat = {"exp_avg": [], "exp_avg_sq": []}
        for f in sorted((f for f in man["files"] if f["name"].startswith("optim-rank")),
                        key=lambda f: f["lo"]):
            h2, o2 = header(f"{d}/{f['name']}")
            for k in flat:
                flat[k].append(read(f"{d}/{f['name']}", h2, o2, k))
        hd, _ = header(f"{d}/model.safetensors")
        order = sorted(hd, key=lambda k: hd[k]["data_offsets"][0])
        for k, parts in flat.items():
            v, pos = np.concatenate(parts), 0
            for n in order:
                size = int(np.prod(hd[n]["shape"]))
                ref[f"{k}.{n}"] = v[pos:pos + size].reshape(hd[n]["shape"])
                pos += size
    return ref


def main():
    mp_dir, ref_dir = sys.argv[1], sys.argv[2]
    bitwise = "--bitwise" in sys.argv
    rel = float(sys.argv[sys.argv.index("--rel") + 1]) if "--rel" in sys.argv else None
    worst = 0.0
    want = None
    if "--layout" in sys.argv:
        want = tuple(map(int, sys.argv[sys.argv.index("--layout") + 1].split("x")))
    got, layouts, size = assemble(mp_dir)
    ref = reference(ref_dir)
    if want and layouts != {want}:
        sys.exit(f"FAIL: {mp_dir}: layout {sorted(layouts)}, expected {want}")
    if set(got) != set(ref):
        sys.exit(f"FAIL: {mp_dir}: tensors differ from {ref_dir}: "
                 f"{sorted(set(got) ^ set(ref))[:4]}")
    for k in ref:
        if got[k].shape != ref[k].shape:
            sys.exit(f"FAIL: {k}: shape {got[k].shape}, the one-rank checkpoint's {ref[k].shape}")
        if bitwise and got[k].tobytes() != ref[k].tobytes():
            sys.exit(f"FAIL: {k}: assembled bytes differ from the one-rank checkpoint's "
                     f"(max |diff| {np.abs(got[k] - ref[k]).max():.3g})")
        if rel is not None:
            a, b = got[k].astype(np.float64), ref[k].astype(np.float64)
            r = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)
            worst = max(worst, r)
            if not r <= rel:
                sys.exit(f"FAIL: {k}: relative L2 {r:.3g} from the one-rank checkpoint's "
                         f"(bound {rel:g})")
    floats = sum(v.size for v in ref.values())
    (T, P), = layouts
    print(f"ok   {'/'.join(mp_dir.split('/')[-3:])}: TP={T} x PP={P} shards, {len(ref)} whole "
          f"tensors assembled{' bitwise' if bitwise else ''} equal to the one-rank "
          f"checkpoint's{f' within {worst:.2g} rel L2' if rel is not None else ''}, every element from one shard ({size / (4 * floats):.4f} x the "
          f"floats' bytes)")

main()
