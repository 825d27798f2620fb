"""rate_check.py DB RESULTS.json EXPORT.csv EXPORT.jsonl - checks grit rate's results and
exports against an independent computation from the SQLite database.

Means, sample standard deviations and 95% confidence intervals (Student t quantile by
bisection on mpmath's regularized incomplete beta), fabrication rates, and Krippendorff's
alpha (interval and ordinal) by the coincidence-matrix method of Krippendorff's own description
(a different algorithm from grit's closed form). Exports: every row and field equal to the
database's, in rating-id order."""
import csv
import json
import math
import sqlite3
import sys

import mpmath

db, res_path, csv_path, jsonl_path = sys.argv[1:5]
con = sqlite3.connect(db)
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL: " + msg)


def t975(df):
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        t = (lo + hi) / 2
        cdf = 1 - 0.5 * float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))
        lo, hi = (t, hi) if cdf < 0.975 else (lo, t)
    return (lo + hi) / 2


def alpha_interval(pairs, ordinal=False):
    """pairs: (unit, value). Coincidence matrix o[c][k]; interval delta (c - k)^2, ordinal
    delta (sum of the marginals n_g for g from c to k - (n_c + n_k) / 2)^2."""
    units = {}
    for u, v in pairs:
        units.setdefault(u, []).append(v)
    o = {}
    for vals in units.values():
        m = len(vals)
        if m < 2:
            continue
        for i in range(m):
            for j in range(m):
                if i != j:
                    key = (vals[i], vals[j])
                    o[key] = o.get(key, 0.0) + 1.0 / (m - 1)
    nc = {}
    for (c, _k), w in o.items():
        nc[c] = nc.get(c, 0.0) + w
    n = sum(nc.values())
    if n < 2:
        return None
    def delta(c, k):
        if not ordinal:
            return (c - k) ** 2
        lo, hi = min(c, k), max(c, k)
        return (sum(w for g, w in nc.items() if lo <= g <= hi) - (nc[c] + nc[k]) / 2) ** 2
    do = sum(w * delta(c, k) for (c, k), w in o.items()) / n
    de = sum(nc[c] * nc[k] * delta(c, k) for c in nc for k in nc) / (n * (n - 1))
    return None if de <= 0 else 1 - do / de


def close(a, b, what, tol=1e-9):
    if a is None or b is None:
        if a is not b:
            fail(f"{what}: grit {a}, reference {b}")
        return
    if not math.isclose(a, b, rel_tol=tol, abs_tol=tol):
        fail(f"{what}: grit {a!r}, reference {b!r}")


res = json.load(open(res_path))
rows = con.execute("SELECT r.answer, r.score, r.fabrication, r.checkpoint, a.step FROM ratings r"
                   " JOIN answers a ON a.id = r.answer").fetchall()
close(res["ratings"], len(rows), "number of ratings")
close(res["raters"], con.execute("SELECT count(DISTINCT rater) FROM ratings").fetchone()[0], "raters")
close(res["alpha"], alpha_interval([(r[0], r[1]) for r in rows]), "alpha over every answer")
close(res["alpha_ordinal"], alpha_interval([(r[0], r[1]) for r in rows], True), "ordinal alpha over every answer")
cks = sorted({(r[4], r[3]) for r in rows})
if [c["checkpoint"] for c in res["checkpoints"]] != [c for _, c in cks]:
    fail(f"checkpoints: {[c['checkpoint'] for c in res['checkpoints']]} vs {cks}")
for c in res["checkpoints"]:
    mine = [r for r in rows if r[3] == c["checkpoint"]]
    s = [r[1] for r in mine]
    n = len(s)
    mean = sum(s) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in s) / (n - 1))
    h = t975(n - 1) * sd / math.sqrt(n)
    close(c["n"], n, c["checkpoint"] + " n")
    close(c["step"], mine[0][4], c["checkpoint"] + " step")
    close(c["mean"], mean, c["checkpoint"] + " mean")
    close(c["ci95"][0], mean - h, c["checkpoint"] + " CI low", 1e-6)
    close(c["ci95"][1], mean + h, c["checkpoint"] + " CI high", 1e-6)
    close(c["fabrication_rate"], sum(r[2] for r in mine) / n, c["checkpoint"] + " fabrication")
    close(c["alpha"], alpha_interval([(r[0], r[1]) for r in mine]), c["checkpoint"] + " alpha")
    close(c["alpha_ordinal"], alpha_interval([(r[0], r[1]) for r in mine], True),
          c["checkpoint"] + " ordinal alpha")
    print(f"ok   {c['checkpoint']}: n {n} mean {mean:.4f} CI [{mean - h:.4f}, {mean + h:.4f}]"
          f" alpha {c['alpha']}")
print(f"ok   alpha over every answer {res['alpha']} (reference agrees)")

ref = con.execute("SELECT r.id, w.name, r.answer, r.checkpoint, a.step, a.prompt, r.version,"
                  " r.score, r.fabrication, r.comment, r.created FROM ratings r"
                  " JOIN raters w ON w.id = r.rater JOIN answers a ON a.id = r.answer"
                  " ORDER BY r.id").fetchall()
cols = ["id", "rater", "answer", "checkpoint", "step", "prompt", "version", "score",
        "fabrication", "comment", "created"]
with open(csv_path, newline="") as f:
    got = list(csv.reader(f))
if got[0] != cols:
    fail(f"CSV header {got[0]}")
conv = [int, str, int, str, int, str, str, int, int, str, float]
got_rows = [tuple(fn(v) for fn, v in zip(conv, row)) for row in got[1:]]
if got_rows != ref:
    fail(f"CSV rows differ from the database: {got_rows[:2]} vs {ref[:2]}")
jl = [json.loads(line) for line in open(jsonl_path)]
jl_rows = [tuple(int(o[k]) if k == "fabrication" else o[k] for k in cols) for o in jl]
if jl_rows != ref or any(list(o) != cols for o in jl):
    fail(f"JSONL rows differ from the database: {jl[:1]} vs {ref[:1]}")
if fails == 0:
    print(f"ok   CSV and JSONL exports equal the database ({len(ref)} ratings)")
sys.exit(1 if fails else 0)
