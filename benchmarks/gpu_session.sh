#!/bin/bash
# The device checks of issue 32 in one call (the device tool's `run`, repository root):
#   bash benchmarks/gpu_session.sh [all|rerun]   # results under $OUT (or /tmp/gpu_session)
# all: the CUDA tests, benchmarks/gpu_overhead.py at 32x32 and 224x224 (none, default,
# reductions, raw, tensorboard), then benchmarks/gpu_profile.py. rerun: the device test file, the
# overhead of the targets' configurations (none, default, reductions) with more steps, the bytes
# of a statistics step. Each part has its own time limit so that the parts before it come back.
set -u
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD:$PWD/benchmarks" PYTHONUNBUFFERED=1
PY=${PY:-python3}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  $PY -c "import sys, torch, torchvision, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'numpy', numpy.__version__)"
  nproc; } 2>&1 | tee "$OUT/machine.txt"
part() { local limit=$1 name=$2; shift 2; echo "== $name (limit ${limit}s)"; local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "== $name: rc $? in $((SECONDS - t0))s"; tail -n 25 "$OUT/$name.log"; }
PYTEST="$PY -m pytest -q -p no:cacheprovider -o addopts= -rs -s -W ignore::DeprecationWarning --timeout=120"
if [ "${1:-all}" = all ]; then
  part 150 tests $PYTEST tests/frameworks/test_torch_device.py tests/frameworks/test_torch_statistics.py \
    tests/frameworks/test_torch_attention.py
  configs=none,default,reductions,raw,tensorboard steps=150 limit=150
else
  part 60 tests $PYTEST tests/frameworks/test_torch_device.py -k "cuda-compile or sync"
  configs=none,default,reductions steps=300 limit=150
fi
for px in 32 224; do
  [ "${1:-all}" != all ] && [ $px = 224 ] && steps=200 limit=185
  part $limit "overhead_$px" $PY benchmarks/gpu_overhead.py --images $px --steps $steps --warmup 20 --rounds 3 \
    --configs $configs --name "gpu_overhead_h200_$px"
  cp benchmarks/results/gpu_overhead_h200_$px.json "$OUT/" 2>/dev/null
done
if [ "${1:-all}" = all ]; then part 80 profile $PY benchmarks/gpu_profile.py --image 32
else part 45 bytes $PY benchmarks/gpu_profile.py --image 32 --bytes-only; fi
