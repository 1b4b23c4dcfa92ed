#!/usr/bin/env bash
# One run on a CUDA machine, everything docs/kernels-gpu.md quotes: conformance check on cuda (a
# passing and a failing candidate), the spec suite on cuda, the kernel tests (fast and slow tier), the
# CUDA benchmark, the step's profile (benchmarks/profile_cuda_step.py), the specs' CUDA benchmark items
# and ../shared/gpu/kernel_speed.py (copied to .gpu/).
# Usage, from the repository root: OUT=/some/folder bash benchmarks/on_gpu.sh
# STEPS="specs spec_bench" (any of check_pass check_fail specs kernels bench profile spec_bench repro
# kernel_speed) runs only those. Each step has its own time limit, so one that hangs costs that step
# only; what comes back lands in $OUT: summary.txt (with check's verdicts, the spec benchmark's table and
# kernel_speed.py's lines), a log per step, results-cuda.json and bench_kernels_cuda.json (the run's
# counterexamples, JUnit XML, check's reports and the spec benchmark's results stay in /tmp/gpu-run).
set -u
OUT=${OUT:?set OUT to the folder for logs and results}
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 CI=true
unset TRITON_INTERPRET
if [ -d .whl ]; then  # what the GPU image lacks (jsonschema and its dependencies), carried as wheels
  python3 -m pip install -q --no-index --find-links .whl --no-compile --no-cache-dir --upgrade --target /tmp/site jsonschema \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || exit 5
fi
RUN=/tmp/gpu-run; mkdir -p $RUN
python3 -m pip install -q --no-deps --no-build-isolation -e . >$RUN/install.log 2>&1 || { cat $RUN/install.log; exit 5; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, pytest, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, 'pytest', pytest.__version__, 'hypothesis', hypothesis.__version__)"
} >"$OUT/summary.txt" 2>&1
STEPS=${STEPS:-check_pass check_fail specs kernels bench profile spec_bench repro kernel_speed}
wanted() { case " $STEPS " in *" $1 "*) return 0;; *) return 1;; esac; }
step() {  # step NAME SECONDS COMMAND...: run with a limit, log to $OUT/NAME.log, one line in summary.txt
  local name=$1 limit=$2; shift 2
  wanted "$name" || return 0
  local start=$SECONDS
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - start)) s: $(grep -E '(passed|failed|error|skipped).* in [0-9.]+s' "$OUT/$name.log" | tail -1)" >>"$OUT/summary.txt"
}
# conformance check on cuda as a user runs it: torch's Adagrad and this suite's kernels as candidates
# (RESULT: PASS expected), and a planted slip (RESULT: FAIL expected); the two in parallel
CHECK="python3 -m conformance check --device cuda --examples 20 --workers 6"
step check_pass 270 $CHECK adagrad=torch.optim:Adagrad sparse_adam=conformance.kernels:SparseAdam \
  coalesce=conformance.kernels:coalesce masked_mean=conformance.kernels:masked_mean \
  --results $RUN/check-pass/candidate.json --report $RUN/check-pass/check.html &
step check_fail 270 $CHECK adagrad=tests/candidates/mutants.py:SquareBeforeSumAdagrad \
  --results $RUN/check-fail/candidate.json --report $RUN/check-fail/check.html &
wait
for name in check_pass check_fail; do
  [ -f "$OUT/$name.log" ] && { echo "$name:"; grep -A12 "^RESULT:" "$OUT/$name.log" | head -14; } >>"$OUT/summary.txt"
done
# correctness first, the two in parallel (16 cores); then the timings alone on a quiet GPU
step specs 240 python3 -m pytest specs -p no:cacheprovider -n 8 --conformance-device cuda \
  --conformance-results $RUN/results-cuda.json -q -rfE &
step kernels 240 python3 -m pytest tests/test_kernels.py -p no:cacheprovider -n 4 --run-slow -q -rfEs &
wait
step bench 120 python3 -m pytest benchmarks/test_bench_kernels_cuda.py -p no:cacheprovider --benchmark-only \
  --benchmark-json="$OUT/bench_kernels_cuda.json" -q -rfE
grep -E "^(FAILED|ERROR)|^E  " "$OUT/bench.log" 2>/dev/null | head -20 >>"$OUT/summary.txt"  # which item failed, and why
[ -f "$OUT/bench_kernels_cuda.json" ] && python3 benchmarks/summarize.py "$OUT/bench_kernels_cuda.json" >>"$OUT/summary.txt" 2>&1
step profile 90 python3 benchmarks/profile_cuda_step.py
# the specs' own CUDA benchmark items (embedding-step-cuda), pytest-benchmark's table into the summary
step spec_bench 150 python3 -m pytest specs -p no:cacheprovider -n 0 --conformance-device cuda --conformance-benchmark \
  -m conformance_benchmark -k embedding-step-cuda --conformance-results $RUN/results-bench.json -q
[ -f "$OUT/spec_bench.log" ] && grep -E "^Name|embedding-step-cuda|passed|failed" "$OUT/spec_bench.log" | tail -12 >>"$OUT/summary.txt"
rm -f "$OUT/spec_bench.log"
# docs/findings.md's repro of torch-half-divide-by-device-count
wanted repro && python3 -c "
import torch
v = torch.full((277,), 0.5156, dtype=torch.bfloat16, device='cuda'); m = torch.ones(277, dtype=torch.bool, device='cuda')
print('divide-by-device-count repro:', (v.sum() / m.sum()).item(), 'vs', (v.sum() / float(m.sum())).item())" >>"$OUT/summary.txt" 2>&1
if wanted kernel_speed && [ -f .gpu/kernel_speed.py ]; then
  step kernel_speed 60 python3 .gpu/kernel_speed.py; cat "$OUT/kernel_speed.log" >>"$OUT/summary.txt"; rm -f "$OUT/kernel_speed.log"
fi
cp $RUN/results-cuda.json "$OUT/" 2>/dev/null
cat "$OUT/summary.txt"
