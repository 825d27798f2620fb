"""Greedy generation: grit's KV-cache inference vs a PyTorch loop (docs/models.md).

usage: gen_ref.py HF_FOLDER DUMP.safetensors

transformers is not installable here (not in Debian), so the reference is a plain greedy
loop over the float64 PyTorch model of the family (decoder_ref.py, independent of grit's C
code) loaded from the Hugging Face folder: at every step the WHOLE sequence so far is
recomputed (no cache), the next token is the argmax of the last position's logits (lowest id
on ties, as torch.argmax), and it is appended. grit (grit-gen-dump) fed the prompt once and
then one token at a time through its KV cache. Checked: every generated id equal, and each
step's logits within 1e-5 tensor-wise relative error (max|a - b| / max|b|).
"""

import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref as ref  # noqa: E402
import hf_family_ref  # noqa: E402
import safetensors_io as st  # noqa: E402


def main(folder, dump):
    cfg = hf_family_ref.from_hf(json.load(open(os.path.join(folder, "config.json"))))
    model = ref.DecoderForCausalLM(cfg, torch.float64)
    w = {k: v.numpy() for k, (v, _) in hf_family_ref.read_hf(folder).items()}
    ref.load_weights_(model, w, folder)
    d = st.load(dump)
    ids, logits = d["ids"].astype(np.int64), d["logits"]
    new = logits.shape[0]
    prompt = list(ids[:len(ids) - new])
    seq = list(prompt)
    worst, fails = 0.0, []
    with torch.no_grad():
        for k in range(new):
            want = model(torch.tensor([seq]))[0, -1]
            err = float((torch.from_numpy(logits[k]).double() - want).abs().max() /
                        want.abs().max())
            worst = max(worst, err)
            if err > 1e-5:
                fails.append(f"step {k}: logits relative error {err:.3e} > 1e-5")
            nxt = int(torch.argmax(want))
            if nxt != int(ids[len(prompt) + k]):
                fails.append(f"step {k}: grit chose {int(ids[len(prompt) + k])}, "
                             f"PyTorch {nxt}")
                break
            seq.append(nxt)
    print(f"{folder} ({cfg.family}, kv heads {cfg.kv_heads}/{cfg.num_heads}): {new} greedy "
          f"tokens, worst logits error {worst:.3e}; reference ids {seq[len(prompt):]}")
    for f in fails:
        print("MISMATCH " + f)
    print("OK" if not fails else "FAIL")
    return 0 if not fails else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
