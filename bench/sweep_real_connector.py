"""End-to-end sweep of kvtrace on the real SGLang and vLLM NIXL connectors, outside the tests' settings.

For each named setting of tests/engines/sglang_pd.py, vllm_pd.py or vllm_engine_pd.py:
the driver alone, then ``kvtrace record --hooks sglang|vllm -o T.kvtrace -- <driver ...>``;
then ``kvtrace validate``, ``kvtrace check --format json`` and ``kvtrace info`` of the trace.
Prints one JSON line per setting: both exit codes, whether the program said the same
(its prefill/decode summary lines, in any order: the two processes print concurrently),
the driver verifier's misaddressed pages (plain, recorded), validate's verdict, the
findings by check and the supported hypotheses. For the bug settings (``-bug`` in the
name) it also says whether the findings' (request, destination slot)s equal the verifier's.

    .venv/bin/python bench/sweep_real_connector.py OUTDIR [SETTING ...]   (default: all)

Run it under ``flock /tmp/kvtrace-heavy.lock nice -n 5``. Results: bench/results/real_connector.txt.
"""
from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENG = os.environ.get("KVTRACE_ENGINES_VENV") or os.path.join(ROOT, ".venv-engines")
EP, MP = os.path.join(ENG, "bin", "python"), sys.executable
E = os.path.join(ROOT, "tests", "engines")
sys.path.insert(0, E)
from free_ports import free_port  # noqa: E402

S, V, VE = (os.path.join(E, f) for f in ("sglang_pd.py", "vllm_pd.py", "vllm_engine_pd.py"))
# name: (hooks, driver, SGLang release, arguments)
RUNS = {
    "s-mha-hd128-p3-tok": ("sglang", S, "0.5.21", "--kv-heads 4 --head-dim 128 --page-tokens 3 --index-k tokens"),
    "s-1layer-p5-tok": ("sglang", S, "0.5.21", "--kv-layers 1 --index-layers 1 --index-k tokens --page-tokens 5"),
    "s-6kv3idx-bytes-bug": ("sglang", S, "0.5.21", "--kv-layers 6 --index-layers 3 --index-k bytes"),
    "s-6kv3idx-bytes-0523": ("sglang", S, "0.5.23", "--kv-layers 6 --index-layers 3 --index-k bytes"),
    "s-tinypool-waves": ("sglang", S, "0.5.21", "--slots 8 --max-pages 4 --wave 2 --requests 12 --index-k tokens --page-tokens 2"),
    "s-tinypool-waves-0523-bytes": ("sglang", S, "0.5.23", "--slots 8 --max-pages 4 --wave 2 --requests 12 --index-k bytes --index-dtype fp8"),
    "s-tp1x2-mha": ("sglang", S, "0.5.21", "--kv-heads 4 --head-dim 32 --decode-tp 2 --index-k tokens --page-tokens 2 --requests 4"),
    "s-tp2x1-mha-bytes-bug": ("sglang", S, "0.5.21", "--kv-heads 2 --prefill-tp 2 --index-k bytes --requests 4"),
    "s-mla-fp8-p7-bug": ("sglang", S, "0.5.21", "--index-k bytes --index-dtype fp8 --page-tokens 7 --kv-layers 3"),
    "s-mla-tp2x4-tok-p3": ("sglang", S, "0.5.21", "--prefill-tp 2 --decode-tp 4 --index-k tokens --page-tokens 3 --requests 4"),
    "s-mla-tp1x2-5kv-bytes-bug": ("sglang", S, "0.5.21", "--decode-tp 2 --kv-layers 5 --index-layers 1 --index-k bytes --page-tokens 6 --requests 4"),
    "s-mla-tp2x1-0523-fp8-tiny": ("sglang", S, "0.5.23", "--prefill-tp 2 --index-k bytes --index-dtype fp8 --slots 8 --max-pages 3 --wave 2 --requests 8"),
    "v-split-bs64-1layer": ("vllm", V, None, "--kv-layout split --block-size 64 --layers 1 --heads 4 --head-size 64"),
    "v-packed-5layers-tiny": ("vllm", V, None, "--kv-layout packed --layers 5 --heads 2 --head-size 128 --blocks 6 --requests 6 --max-blocks 2"),
    "v-mla-3layers": ("vllm", V, None, "--kv-layout mla --layers 3 --requests 4"),
    "v-oneproc-split": ("vllm", V, None, "--role one-process --kv-layout split --layers 3 --heads 2"),
    "v-late-read-3layers-bug": ("vllm", V, None, "--lease 2 --decode-delay 6 --layers 3 --heads 2 --head-size 32"),
    "v-packed-bs96-4heads-hs256": ("vllm", V, None, "--block-size 96 --heads 4 --head-size 256 --layers 2 --requests 3 --max-blocks 2"),
    "v-split-tiny-6req": ("vllm", V, None, "--kv-layout split --blocks 5 --requests 6 --max-blocks 2 --layers 4"),
    "v-mla-kernel-4layers": ("vllm", V, None, "--kv-layout mla --kernel-blocks --block-size 64 --layers 4 --requests 3"),
    "v-procsched-split-late-bug": ("vllm", V, None, "--prefill-scheduler process --kv-layout split --layers 1 --lease 2 --decode-delay 6"),
    "ve-1layer-bs64": ("vllm", VE, None, "--layers 1 --block-size 64 --heads 4"),
    "ve-lease-3layers-bug": ("vllm", VE, None, "--layers 3 --bug prefill-lease --timeout 60"),
    "ve-abort-1layer-bug": ("vllm", VE, None, "--layers 1 --bug decode-abort-free --timeout 60"),
    "ve-swa-bs64": ("vllm", VE, None, "--swa 128 --layers 2 --block-size 64 --prefill-blocks 48 --heads 2"),
}


def env(release: str | None) -> dict:
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    if release == "0.5.23":   # as tests/engines/engine_runs.py's env_for
        e["PYTHONPATH"] = os.path.join(ENG, "sglang-0.5.23")
    return e


def ports(drv: str, d: str, tag: str) -> list[str]:
    if drv == S:
        return ["--port", str(free_port())]
    return ["--side-port", str(free_port()), "--dist-port", str(free_port()), "--xchg", os.path.join(d, f"x-{tag}")]


def said(stdout: str) -> collections.Counter:
    """The driver's summary lines (prefill's and decode's, printed concurrently: any order)."""
    return collections.Counter(m.strip() for m in re.findall(r"(?:prefill|decode): .*?(?=(?:prefill|decode): |\n|$)", stdout))


def verifier_slots(report: dict) -> set:
    """(request, destination slot) of the driver verifier's misaddressed pages."""
    return {(str(m.get("room", m.get("request"))), m.get("slot", m.get("block"))) for m in report["misaddressed"]}


def one(out: str, name: str) -> dict:
    hooks, drv, release, args = RUNS[name]
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    res: dict = {"name": name, "args": args, "sglang": release}
    procs = {}
    for mode in ("plain", "rec"):
        prog = [EP, drv] + args.split() + ports(drv, d, mode) + ["--report", os.path.join(d, f"{mode}.json")]
        cmd = prog if mode == "plain" else [EP, "-m", "kvtrace", "record", "--hooks", hooks, "-o",
                                            os.path.join(d, "T.kvtrace"), "--"] + prog
        t0 = time.time()
        procs[mode] = subprocess.run(cmd, capture_output=True, text=True, env=env(release), cwd=d, timeout=400)
        res[f"{mode}_s"] = round(time.time() - t0, 1)
        with open(os.path.join(d, f"{mode}.out"), "w") as f:
            f.write(procs[mode].stdout + "\n--stderr--\n" + procs[mode].stderr)
    res["rc"] = [procs["plain"].returncode, procs["rec"].returncode]
    res["said_same"] = said(procs["plain"].stdout) == said(procs["rec"].stdout)
    reports = {}
    for mode in ("plain", "rec"):
        p = os.path.join(d, f"{mode}.json")
        reports[mode] = json.load(open(p)) if os.path.exists(p) else None
    res["misaddressed"] = [len(r["misaddressed"]) if r else None for r in reports.values()]
    tr = os.path.join(d, "T.kvtrace")
    v = subprocess.run([MP, "-m", "kvtrace", "validate", tr], capture_output=True, text=True)
    res["validate"] = [v.returncode, (v.stdout + v.stderr).strip()[-300:]]
    c = subprocess.run([MP, "-m", "kvtrace", "check", tr, "--format", "json"], capture_output=True, text=True)
    if c.returncode in (0, 1):
        cj = json.loads(c.stdout)
        with open(os.path.join(d, "check.json"), "w") as f:
            f.write(c.stdout)
        res["findings"] = dict(collections.Counter(f["check"] for f in cj["findings"]))
        res["supported"] = [h["name"] for h in cj["verdict"]["hypotheses"] if h["status"] == "supported"]
        if reports["rec"] and reports["rec"]["misaddressed"] and drv == S:
            got = {(f["request"], s) for f in cj["findings"] for s in f["slots"]}
            res["verifier_pages_found"] = verifier_slots(reports["rec"]) <= got
    else:
        res["check_error"] = c.stderr.strip()[-300:]
    i = subprocess.run([MP, "-m", "kvtrace", "info", tr], capture_output=True, text=True)
    with open(os.path.join(d, "info.txt"), "w") as f:
        f.write(i.stdout + i.stderr)
    res["info_rc"] = i.returncode
    return res


def main() -> int:
    out, names = sys.argv[1], sys.argv[2:] or list(RUNS)
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        print(f"sweep_real_connector: unknown setting(s) {unknown}; known: {list(RUNS)}", file=sys.stderr)
        return 2
    for n in names:
        print(json.dumps(one(out, n)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
