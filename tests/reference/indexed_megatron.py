#!/usr/bin/env python3
"""indexed_megatron.py - Megatron's MMIDIDX v1 code path, for grit's cross-check.

    indexed_megatron.py spec SEED NDOCS VOCAB OUT.spec   random dataset as a spec
    indexed_megatron.py write SPEC PREFIX DTYPE          write like MMapIndexedDatasetBuilder
    indexed_megatron.py dump PREFIX                      read like MMapIndexedDataset

The reader and writer follow Megatron-LM's megatron/data/indexed_dataset.py
(MMapIndexedDataset.Index and MMapIndexedDatasetBuilder): struct-packed
header, numpy memmap + np.frombuffer for sizes (int32), pointers (int64) and
doc_idx (int64), and np.frombuffer on a memmap of the .bin per sequence.
Written independently from the published layout, not copied.
"""
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
          8: np.uint16}


def read_spec(path):
    events = []
    for line in open(path):
        if line.startswith("D"):
            events.append(None)
        else:
            events.append([int(x) for x in line[1:].split()])
    return events


def write(spec, prefix, code):
    dtype = DTYPES[code]
    sizes, doc_idx = [], [0]
    with open(prefix + ".bin", "wb") as b:
        for ev in read_spec(spec):
            if ev is None:
                doc_idx.append(len(sizes))
            else:
                arr = np.array(ev, dtype=dtype)
                b.write(arr.tobytes(order="C"))
                sizes.append(arr.size)
    pointers, address = [], 0
    for s in sizes:
        pointers.append(address)
        address += s * np.dtype(dtype).itemsize
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sizes)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(np.array(sizes, dtype=np.int32).tobytes(order="C"))
        f.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        f.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))


def dump(prefix):
    with open(prefix + ".idx", "rb") as f:
        assert f.read(9) == MAGIC, "magic"
        (version,) = struct.unpack("<Q", f.read(8))
        assert version == 1, "version"
        (code,) = struct.unpack("<B", f.read(1))
        dtype = DTYPES[code]
        (n,) = struct.unpack("<Q", f.read(8))
        (m,) = struct.unpack("<Q", f.read(8))
        offset = f.tell()
    idx_buf = memoryview(np.memmap(prefix + ".idx", mode="r", order="C"))
    sizes = np.frombuffer(idx_buf, dtype=np.int32, count=n, offset=offset)
    pointers = np.frombuffer(idx_buf, dtype=np.int64, count=n, offset=offset + sizes.nbytes)
    doc_idx = np.frombuffer(idx_buf, dtype=np.int64, count=m, offset=offset + sizes.nbytes + pointers.nbytes)
    bin_buf = memoryview(np.memmap(prefix + ".bin", mode="r", order="C"))
    out = []
    seq = 0
    for d in range(m):
        end = int(doc_idx[d + 1]) if d + 1 < m else n
        for seq in range(seq, end):
            toks = np.frombuffer(bin_buf, dtype=dtype, count=int(sizes[seq]), offset=int(pointers[seq]))
            out.append("S" + "".join(f" {int(t)}" for t in toks))
        seq = end
        if d + 1 < m:
            out.append("D")
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))


def spec(seed, ndocs, vocab, path):
    rng = np.random.RandomState(seed)
    with open(path, "w") as f:
        for _ in range(ndocs):
            for _ in range(rng.randint(0, 4)):
                toks = rng.randint(0, vocab, size=rng.randint(0, 3000))
                f.write("S" + "".join(f" {t}" for t in toks) + "\n")
            f.write("D\n")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "spec":
        spec(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif cmd == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "dump":
        dump(sys.argv[2])
    else:
        sys.exit("usage: see the module docstring")
