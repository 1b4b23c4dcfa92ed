"""pytest-benchmark: the main job (the README's first command's pytest run) end to end.

Run from the repository root, on a quiet machine (not part of either test tier):

    python -m pytest benchmarks/test_bench_main_job.py --benchmark-only \
        --benchmark-json=reports/bench_main_job.json

Each round is one ``pytest specs -n auto --conformance-device cpu`` in a child process, as the README
runs it (results and JUnit XML into a temporary folder), timed from start to exit: startup, the
workers, the C++ kernels' cache, Inductor's compiles and the results file included. A first,
untimed round warms the caches a fresh clone fills once (the C++ kernels, Inductor's FX graph
cache). ``extra_info`` holds the round's counts from its summary line, the machine's load average
before the round, and the CPU seconds of the children (user + system), which load does not inflate
as it does wall-clock time.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROUNDS = int(os.environ.get("CONFORMANCE_BENCH_MAIN_JOB_ROUNDS", "3"))


def _main_job(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "specs", "-n", "auto", "-p", "no:cacheprovider", "--conformance-device", "cpu",
         "--conformance-results", str(out / "results.json"), "--junitxml", str(out / "junit.xml"), "-q"],
        cwd=REPO, capture_output=True, text=True, timeout=900)


def test_main_job(benchmark, tmp_path):
    rounds: list[dict] = []

    def one_round():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        done = _main_job(tmp_path)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ passed", line)][-1]
        rounds.append({"summary": summary, "load_before": round(load, 2),
                       "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)})

    one_round()  # warm-up: the caches a fresh clone fills once
    rounds.clear()
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    benchmark.extra_info["rounds"] = rounds
    benchmark.extra_info["cores"] = os.cpu_count()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "--benchmark-only", *sys.argv[1:]]))
