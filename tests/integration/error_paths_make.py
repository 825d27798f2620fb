"""error_paths_make.py DIR - writes malformed inputs for error_paths.sh: Hugging Face folders
whose model.safetensors is broken in one way each (DIR/st_<case>/), and WARC files whose
record headers are broken (DIR/<case>.warc)."""
import sys
import json, os, struct
cfg = {"architectures":["GPTNeoXForCausalLM"],"model_type":"gpt_neox","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":256,"vocab_size":512,"max_position_embeddings":128,"rotary_pct":0.25,"rotary_emb_base":10000,"layer_norm_eps":1e-5,"hidden_act":"gelu","use_parallel_residual":True,"tie_word_embeddings":False}
def st(header, data=b""):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data
cases = {
 "empty": b"",
 "short": b"\x01\x02",
 "hugelen": struct.pack("<Q", 1<<40) + b"{}",
 "badjson": struct.pack("<Q", 5) + b"{abc}",
 "notobj": st([1,2]),
 "baddtype": st({"gpt_neox.embed_in.weight":{"dtype":"Q7","shape":[512,64],"data_offsets":[0,4]}}, b"\0"*4),
 "offsets": st({"gpt_neox.embed_in.weight":{"dtype":"F32","shape":[512,64],"data_offsets":[0,999999]}}),
 "shape": st({"gpt_neox.embed_in.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}, b"\0"*16),
 "missing": st({"__metadata__":{"format":"pt"}}),
}
root = sys.argv[1]
for k, v in cases.items():
    d = os.path.join(root, "st_" + k)
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(d + "/config.json", "w"))
    open(d + "/model.safetensors", "wb").write(v)
# a 1 KB config describing Llama-2-70B's widths beside a tiny file: refused before the
# model (280 GB of F32 parameters) is allocated
big = dict(cfg, hidden_size=8192, num_hidden_layers=80, num_attention_heads=64,
           intermediate_size=28672, vocab_size=32000)
d = os.path.join(root, "st_bigconfig")
os.makedirs(d, exist_ok=True)
json.dump(big, open(d + "/config.json", "w"))
open(d + "/model.safetensors", "wb").write(st({"__metadata__": {"format": "pt"}}))
rec = "WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://x/\r\n%s\r\nHTTP/1.1 200 OK\r\n\r\n<p>hi</p>\r\n\r\n"
warcs = {
 "clen_text": "Content-Length: abc\r\n",
 "clen_negative": "Content-Length: -5\r\n",
 "clen_overflow": "Content-Length: 99999999999999999999\r\n",
 "clen_missing": "",
 "clen_past_end": "Content-Length: 99999\r\n",
}
for k, h in warcs.items():
    open(os.path.join(root, k + ".warc"), "w", newline="").write(rec % h)
open(os.path.join(root, "headers_cut.warc"), "w", newline="").write(
    "WARC/1.0\r\nWARC-Target-URI: http://x/\r\nContent-Le")
