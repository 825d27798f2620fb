#!/usr/bin/python3
"""gpt_index_ref.py TOOL WORKDIR - grit's Megatron sample order vs numpy.

Builds the doc / sample / shuffle indices, the train/valid/test split and
the blending index the way Megatron's megatron/data/gpt_dataset.py,
dataset_utils.py, blendable_dataset.py and helpers.cpp do (numpy
RandomState shuffles; the C++ helpers written out as Python loops), for
several seeds, corpus sizes and sequence lengths, and checks that grit's
tests/reference/gptidx_tool.c writes identical arrays. Exits non-zero on
the first difference, printing where.
"""
import math
import os
import subprocess
import sys

import numpy as np

TOOL, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL", msg)


# ---- Megatron's algorithms, with numpy ----------------------------------
def split_bounds(splits_string, size):
    if splits_string.find(',') != -1:
        splits = [float(s) for s in splits_string.split(',')]
    elif splits_string.find('/') != -1:
        splits = [float(s) for s in splits_string.split('/')]
    else:
        splits = [float(splits_string)]
    while len(splits) < 3:
        splits.append(0.)
    splits = splits[:3]
    splits_sum = sum(splits)
    splits = [split / splits_sum for split in splits]
    idx = [0]
    for index, split in enumerate(splits):
        idx.append(idx[index] + int(round(split * float(size))))
    diff = idx[-1] - size
    for index in range(1, len(idx)):
        idx[index] -= diff
    return idx


def num_epochs(tokens_per_epoch, seq_length, num_samples):
    epochs, total = 0, 0
    while True:
        epochs += 1
        total += tokens_per_epoch
        if ((total - 1) // seq_length) >= num_samples:
            return epochs


def build_doc_idx(documents, epochs, rng, separate_last_epoch):
    if not separate_last_epoch or epochs == 1:
        doc_idx = np.mgrid[0:epochs, 0:len(documents)][1]
        doc_idx[:] = documents
        doc_idx = doc_idx.reshape(-1).astype(np.int32)
        rng.shuffle(doc_idx)
        return doc_idx
    first = build_doc_idx(documents, epochs - 1, rng, False)
    last = build_doc_idx(documents, 1, rng, False)
    return np.concatenate((first, last))


def build_sample_idx(sizes, doc_idx, seq_length, epochs, tokens_per_epoch):
    num_samples = (epochs * tokens_per_epoch - 1) // seq_length
    out = np.zeros((num_samples + 1, 2), dtype=np.int64)
    sample_index, doc_idx_index, doc_offset = 1, 0, 0
    while sample_index <= num_samples:
        remaining = seq_length + 1
        while remaining != 0:
            doc_length = int(sizes[doc_idx[doc_idx_index]]) - doc_offset
            remaining -= doc_length
            if remaining <= 0:
                doc_offset += remaining + doc_length - 1
                remaining = 0
            else:
                doc_idx_index += 1
                doc_offset = 0
        out[sample_index] = (doc_idx_index, doc_offset)
        sample_index += 1
    return out


def build_shuffle_idx(num_samples, total_size, rng):
    first = np.arange(0, num_samples, 1, dtype=np.uint32)
    rng.shuffle(first)
    if num_samples == total_size:
        return first
    last = np.arange(num_samples, total_size, 1, dtype=np.uint32)
    rng.shuffle(last)
    return np.concatenate((first, last))


def build_index_mappings(documents, sizes, num_samples, seq_length, seed):
    tokens_per_epoch = int(np.sum(sizes[documents]))
    epochs = num_epochs(tokens_per_epoch, seq_length, num_samples)
    rng = np.random.RandomState(seed=seed)
    if epochs == 1:
        separate = False
    else:
        from_minus_one = ((epochs - 1) * tokens_per_epoch - 1) // seq_length
        last = num_samples - from_minus_one
        per_epoch = (tokens_per_epoch - 1) // seq_length
        separate = last < int(0.80 * per_epoch)
    doc_idx = build_doc_idx(documents, epochs, rng, separate)
    sample_idx = build_sample_idx(sizes, doc_idx, seq_length, epochs, tokens_per_epoch)
    n_ = from_minus_one if separate else sample_idx.shape[0] - 1
    shuffle_idx = build_shuffle_idx(n_, sample_idx.shape[0] - 1, rng)
    return doc_idx, sample_idx, shuffle_idx, (epochs, int(separate), tokens_per_epoch)


def blend_weights(raw, total):
    s = 0.0
    for w in raw:
        s += w
    w1 = [w / s for w in raw]
    counts = [int(math.ceil(total * w * 1.005)) for w in w1]
    w2 = np.array(w1, dtype=np.float64)
    w2 /= np.sum(w2)
    return w2, counts


def build_blending_indices(weights, size):
    k = len(weights)
    which = np.zeros(size, dtype=np.uint8)
    at = np.zeros(size, dtype=np.int64)
    cur = [0] * k
    for i in range(size):
        x = max(float(i), 1.0)
        best, err = 0, weights[0] * x - float(cur[0])
        for d in range(1, k):
            e = weights[d] * x - float(cur[d])
            if e > err:
                best, err = d, e
        which[i], at[i] = best, cur[best]
        cur[best] += 1
    return which, at


# ---- comparisons --------------------------------------------------------
def run(*args):
    subprocess.run([TOOL] + [str(a) for a in args], check=True)


def load(path, dtype):
    return np.fromfile(path, dtype=dtype)


def same(name, a, b):
    a, b = np.asarray(a).astype(np.int64).ravel(), np.asarray(b).astype(np.int64).ravel()
    if a.shape != b.shape:
        fail(f"{name}: length {a.shape[0]} (grit) vs {b.shape[0]} (numpy)")
        return False
    bad = np.nonzero(a != b)[0]
    if bad.size:
        i = bad[0]
        fail(f"{name}: {bad.size} entries differ, first at {i}: {a[i]} (grit) vs {b[i]} (numpy)")
        return False
    return True


# permutations: RandomState(seed).permutation(n) and array seeds
for seed, n in [(0, 10), (1234, 1000), (42, 70000), (2**32 - 1, 5000), (7, 1)]:
    d = os.path.join(WORK, f"perm_{seed}_{n}")
    os.makedirs(d, exist_ok=True)
    run("perm", seed, n, d)
    same(f"permutation seed={seed} n={n}", load(d + "/perm.i64", np.int64),
         np.random.RandomState(seed).permutation(n))
for key in [[1, 2], [5], [123456789, 987654321, 3]]:
    d = os.path.join(WORK, "perm_arr_" + "_".join(map(str, key)))
    os.makedirs(d, exist_ok=True)
    run("perm_array", 3000, d, *key)
    same(f"permutation seed={key}", load(d + "/perm.i64", np.int64),
         np.random.RandomState(key).permutation(3000))

# splits
for spec, n in [("969,30,1", 1000), ("969,30,1", 7), ("98,2,0", 12345), ("1", 10),
                ("0.5/0.25/0.25", 3), ("949, 50, 1", 100001), ("1,1,1", 10),
                ("2,1", 5), ("1,1,1,1", 9), ("3,0,1", 2)]:
    out = subprocess.run([TOOL, "split", spec, str(n)], check=True, capture_output=True,
                         text=True).stdout.split()
    want = split_bounds(spec, n)
    if [int(x) for x in out] != want:
        fail(f"split {spec!r} n={n}: {out} (grit) vs {want} (numpy)")
print("permutations and splits checked")

# indices: seeds x corpus sizes x sequence lengths x sample counts
cases = 0
for seed in [1234, 0, 42, 31337]:
    rs = np.random.RandomState(seed + 1)
    for ndocs, maxlen, seq_len, nsamp, split in [
            (50, 40, 16, 30, "969,30,1"),     # one epoch
            (40, 30, 32, 100, "1"),           # several epochs, last one small
            (23, 200, 64, 97, "8,1,1"),       # several epochs
            (300, 17, 8, 2000, "969,30,1"),   # short documents, many per sample
            (5, 1000, 128, 40, "1"),          # samples inside long documents
            (60, 25, 20, 71, "7,2,1"),
            (30, 20, 16, 0, "1")]:        # a weight-0 dataset of a blend
        sizes = rs.randint(1, maxlen, size=ndocs).astype(np.int32)
        sizes[rs.randint(0, ndocs)] = 1
        b = split_bounds(split, ndocs)
        documents = np.arange(b[0], b[1], dtype=np.int32)
        doc_idx, sample_idx, shuffle_idx, meta = build_index_mappings(
            documents, sizes, nsamp, seq_len, seed)
        d = os.path.join(WORK, f"idx_{seed}_{ndocs}_{seq_len}_{nsamp}")
        os.makedirs(d, exist_ok=True)
        sizes.tofile(d + "/sizes.i32")
        run("index", d + "/sizes.i32", b[0], b[1], nsamp, seq_len, seed, d)
        tag = f"seed={seed} docs={ndocs} seq={seq_len} samples={nsamp}"
        got_meta = tuple(int(x) for x in open(d + "/meta.txt").read().split())
        if got_meta != meta:
            fail(f"{tag}: epochs/separate/tokens {got_meta} (grit) vs {meta} (numpy)")
        same(f"{tag} doc_idx", load(d + "/doc_idx.i32", np.int32), doc_idx)
        same(f"{tag} sample_idx", load(d + "/sample_idx.i64", np.int64), sample_idx)
        same(f"{tag} shuffle_idx", load(d + "/shuffle_idx.i64", np.int64), shuffle_idx)
        cases += 1
print(f"{cases} index cases checked")

# blending
for weights, size in [([1.0, 1.0], 100), ([0.3, 0.7], 1000), ([5, 1, 2], 777),
                      ([0.1] * 9 + [0.05], 2000), ([1, 0, 3], 50), ([2.5], 10)]:
    d = os.path.join(WORK, "blend_" + "_".join(map(str, weights))[:60] + f"_{size}")
    os.makedirs(d, exist_ok=True)
    run("blend", size, d, *weights)
    w2, counts = blend_weights([float(w) for w in weights], size)
    which, at = build_blending_indices(w2, size)
    got = [l.split() for l in open(d + "/w.txt")]
    if [float(g[0]) for g in got] != list(w2) or [int(g[1]) for g in got] != counts:
        fail(f"blend {weights}: weights/counts {got} (grit) vs {list(w2)} {counts} (numpy)")
    same(f"blend {weights} which", load(d + "/which.u8", np.uint8), which)
    same(f"blend {weights} at", load(d + "/at.i64", np.int64), at)
print("blending checked")

if failures:
    print(f"{failures} failure(s)")
    sys.exit(1)
print("all identical")
