"""eval_ref.py - the PyTorch reference for `grit eval` (tests/integration/eval.sh).

    eval_ref.py make-tasks CORPUS.jsonl OUTDIR     multiple-choice and cloze task files
    eval_ref.py logits STEP_DIR IDS LOGITS.npy     grit's logits vs the reference (1e-5)
    eval_ref.py ppl STEP_DIR PREFIX SEQ MAXTOK RESULT.json
                                                   grit's windowed loss vs the reference
    eval_ref.py task STEP_DIR TASK.jsonl mc|cloze DETAILS.jsonl RESULT.json
                                                   every item's log-likelihood and the
                                                   accuracy vs a reference scorer

The reference model is tests/reference/gptneox_ref.py in float64 with the checkpoint's
weights; the scorer applies the rules of docs/eval.md independently of grit's C code
(it takes grit's token ids from the details file, since tokenization is tested elsewhere).
Exits 1 with the reason on any mismatch."""
import json
import math
import os
import random
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import check_ckpt  # noqa: E402
import gptneox_ref as ref  # noqa: E402
import safetensors_io as st  # noqa: E402



def load(step_dir):
    hf = json.load(open(os.path.join(step_dir, "config.json")))
    model = ref.GPTNeoXForCausalLM(check_ckpt.hf_to_model_cfg(hf), dtype=torch.float64)
    ref.load_weights_(model, st.load(os.path.join(step_dir, "model.safetensors")), step_dir)
    model.eval()
    return model


def logprobs(model, ids):
    """log p(ids[i+1] | ids[:i+1]) for i in [0, len-1), and whether each is the argmax."""
    with torch.no_grad():
        x = model(torch.tensor([ids], dtype=torch.int64))[0]
    lsm = torch.log_softmax(x, dim=-1)
    nxt = torch.tensor(ids[1:])
    lp = lsm[:-1].gather(1, nxt[:, None])[:, 0]
    greedy = x[:-1].argmax(dim=-1) == nxt
    return lp.numpy(), greedy.numpy(), x.numpy()


def read_idx(prefix):
    """Every sequence of a Megatron indexed dataset, in order (docs/formats.md)."""
    import struct
    with open(prefix + ".idx", "rb") as f:
        assert f.read(9) == b"MMIDIDX\x00\x00", "magic"
        assert struct.unpack("<Q", f.read(8))[0] == 1, "version"
        dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
                 7: np.float32, 8: np.uint16}[struct.unpack("<B", f.read(1))[0]]
        n = struct.unpack("<Q", f.read(8))[0]
        f.read(8)
        sizes = np.frombuffer(f.read(4 * n), dtype=np.int32)
        pointers = np.frombuffer(f.read(8 * n), dtype=np.int64)
    data = open(prefix + ".bin", "rb").read()
    return [np.frombuffer(data, dtype=dtype, count=int(c), offset=int(p)) for c, p in zip(sizes, pointers)]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def cmd_make_tasks(corpus, out):
    rnd = random.Random(7)
    sents = []
    for line in open(corpus):
        for s in json.loads(line)["text"].replace("\n", " ").split(". "):
            w = s.split()
            if 8 <= len(w) <= 30:
                sents.append(" ".join(w))
    rnd.shuffle(sents)
    with open(os.path.join(out, "mc.jsonl"), "w") as f:
        for i in range(24):
            w = sents[i].split()
            k = len(w) // 2
            choices = [" ".join(w[k:])] + [" ".join(sents[(i + j * 7 + 1) % len(sents)].split()[k:])
                                           for j in range(3)]
            gold = rnd.randrange(4)
            choices[0], choices[gold] = choices[gold], choices[0]
            item = {"id": i, "context": " ".join(w[:k]), "choices": choices, "gold": gold}
            if i == 5:
                item["context"] = ""  # starts from <|endoftext|>
            f.write(json.dumps(item) + "\n")
            if i == 3:
                f.write("\n")  # blank lines are skipped
    with open(os.path.join(out, "cloze.jsonl"), "w") as f:
        for s in sents[30:54]:
            f.write(json.dumps({"text": s, "source": "GPL"}) + "\n")
    return 0


def rel(a, b):
    return float(np.abs(a - b).max() / (np.abs(b).max() + 1e-30))


def cmd_logits(step_dir, ids, npy):
    ids = [int(x) for x in ids.split(",")]
    got = np.load(npy)
    if got.shape != (len(ids), got.shape[1]) or got.dtype != np.float32:
        fail(f"{npy}: shape {got.shape} dtype {got.dtype}")
    _, _, want = logprobs(load(step_dir), ids)
    err = rel(got.astype(np.float64), want)
    print(f"logits ({len(ids)} tokens): relative error {err:.3e} (tolerance 1e-5)")
    return 0 if err <= 1e-5 else 1


def cmd_ppl(step_dir, prefix, seq, maxtok, result):
    seq, maxtok = int(seq), int(maxtok)
    stream = np.concatenate(read_idx(prefix)).astype(np.int64)[:maxtok]
    model = load(step_dir)
    nll, n, w = 0.0, 0, 0
    for at in range(0, len(stream) - 1, seq):
        win = stream[at:at + seq + 1].tolist()
        if len(win) < 2:
            break
        lp, _, _ = logprobs(model, win)
        nll -= lp.sum()
        n += len(win) - 1
        w += 1
    got = json.load(open(result))
    err = abs(got["loss"] - nll / n) / (nll / n)
    print(f"loss over {n} tokens in {w} windows: grit {got['loss']:.9f}, reference "
          f"{nll / n:.9f}, relative error {err:.2e} (tolerance 1e-6)")
    if got["tokens"] != n or got["windows"] != w:
        fail(f"grit scored {got['tokens']} tokens in {got['windows']} windows, expected {n} in {w}")
    return 0 if err <= 1e-6 else 1


def cmd_task(step_dir, task, kind, details, result):
    model = load(step_dir)
    items = [json.loads(l) for l in open(task) if l.strip()]
    det = [json.loads(l) for l in open(details)]
    if len(det) != len(items):
        fail(f"{len(det)} detail lines for {len(items)} items")
    worst, right, right_norm, sum_ll, ties = 0.0, 0, 0, 0.0, 0
    for it, d in zip(items, det):
        scored = d["choices"] if kind == "mc" else [d["score"]]
        lls, greedy_all = [], []
        for sc in scored:
            ctx, cont = sc["context_ids"], sc["continuation_ids"]
            lp, gr, _ = logprobs(model, ctx + cont)
            ll = float(lp[len(ctx) - 1:].sum())
            worst = max(worst, abs(ll - sc["loglikelihood"]) / max(1.0, abs(ll)))
            if bool(gr[len(ctx) - 1:].all()) != sc["greedy"]:
                fail(f"line {d['line']}: greedy {sc['greedy']}, reference {bool(gr[len(ctx)-1:].all())}")
            lls.append(ll)
            greedy_all.append(bool(gr[len(ctx) - 1:].all()))
        if kind == "mc":
            norm = [ll / max(1, len(c)) for ll, c in zip(lls, it["choices"])]
            srt = sorted(lls)
            if srt[-1] - srt[-2] < 1e-4:
                ties += 1
            pred, pred_norm = int(np.argmax(lls)), int(np.argmax(norm))
            if (pred, pred_norm) != (d["pred"], d["pred_norm"]):
                if srt[-1] - srt[-2] >= 1e-4:
                    fail(f"line {d['line']}: grit predicts {d['pred']}/{d['pred_norm']}, the "
                         f"reference {pred}/{pred_norm}")
                pred, pred_norm = d["pred"], d["pred_norm"]  # a near-tie: float rounding decides
            right += pred == it["gold"]
            right_norm += pred_norm == it["gold"]
        else:
            right += greedy_all[0]
            sum_ll += lls[0]
    n = len(items)
    got = json.load(open(result))
    acc = right / n
    se = math.sqrt(acc * (1 - acc) / (n - 1))
    print(f"{kind}: {n} items, worst log-likelihood error {worst:.2e} (tolerance 1e-5); acc grit "
          f"{got['acc']:.4f} reference {acc:.4f}; stderr grit {got['acc_stderr']:.4f} reference "
          f"{se:.4f}; near-ties {ties}")
    if worst > 1e-5:
        fail("log-likelihoods differ")
    if got["items"] != n or abs(got["acc"] - acc) > 1e-9 or abs(got["acc_stderr"] - se) > 1e-9:
        fail("accuracy or its standard error differs")
    if kind == "mc" and abs(got["acc_norm"] - right_norm / n) > 1e-9:
        fail(f"acc_norm grit {got['acc_norm']}, reference {right_norm / n}")
    if kind == "cloze":
        ppl = math.exp(-sum_ll / n)
        if abs(got["ppl"] - ppl) / ppl > 1e-5:
            fail(f"target perplexity grit {got['ppl']}, reference {ppl}")
    return 0


def main(argv):
    ref.configure_torch(threads=1)
    cmds = {"make-tasks": cmd_make_tasks, "logits": cmd_logits, "ppl": cmd_ppl, "task": cmd_task}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__)
        return 2
    return cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
