"""compare_runs.py A B: every result.json (metrics, tables, claims), *.json and *.jsonl under run folder A against B.

Exact equality (a refactor that promises no change of behaviour must give 0 differences on the same machine).
Fields that measure time or the machine (seconds, per_s, provenance, load) are skipped. Prints each difference;
exit 1 when any.
"""
import json
import pathlib
import sys

SKIP = ("second", "per_s", "provenance", "load_average", "time", "elapsed", "command", "out", "folder", "path")

def walk(a, b, where, diffs):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if any(s in str(k).lower() for s in SKIP):
                continue
            if k not in a or k not in b:
                diffs.append(f"{where}.{k}: only in {'A' if k in a else 'B'}")
                continue
            walk(a[k], b[k], f"{where}.{k}", diffs)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{where}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{where}[{i}]", diffs)
    elif a != b and not (isinstance(a, float) and isinstance(b, float) and a != a and b != b):
        diffs.append(f"{where}: {a!r} != {b!r}")

def load(p):
    if p.suffix == ".jsonl":
        return [json.loads(l) for l in p.read_text().splitlines() if l.strip()]
    return json.loads(p.read_text())

A, B = map(pathlib.Path, sys.argv[1:3])
diffs, n = [], 0
for pa in sorted(A.rglob("*")):
    if pa.suffix not in (".json", ".jsonl") or not pa.is_file():
        continue
    pb = B / pa.relative_to(A)
    n += 1
    if not pb.exists():
        diffs.append(f"{pa.relative_to(A)}: missing in B")
        continue
    data_a, data_b = load(pa), load(pb)
    if pa.name == "result.json":
        data_a = {k: data_a.get(k) for k in ("metrics", "tables", "claims", "checks")}
        data_b = {k: data_b.get(k) for k in ("metrics", "tables", "claims", "checks")}
    walk(data_a, data_b, str(pa.relative_to(A)), diffs)
print(*diffs[:60], sep="\n")
print(f"{n} files compared, {len(diffs)} differences")
sys.exit(1 if diffs else 0)
