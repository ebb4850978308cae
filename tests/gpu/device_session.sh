#!/usr/bin/env bash
# GPU evidence on one H200 (sm_90), in three calls of the device tool over one machine lease
# (the machine goes back 30 s after a call: make the next call at once):
#
#   bash tests/gpu/device_session.sh build     # our measured dev build + the dev wheel   (~8-9 min)
#   bash tests/gpu/device_session.sh test      # GPU checks and benchmarks on a quiet machine (~6 min),
#                                              #   then starts upstream's build in the background
#   bash tests/gpu/device_session.sh upstream  # waits for upstream's build, writes the build report
#
# A later lease can rerun the GPU checks without building: carry the wheel that `build` returned
# (WHEEL=path/to.whl bash tests/gpu/device_session.sh test).
#
# Needs, carried with the working tree (ignored by git): .whl/ (cmake, scikit-build-core, wheel,
# pathspec wheels for Python 3.12) and .sdist/flash_attn-2.8.3.post2.tar.gz. Work lives in
# /tmp/fa (kept between calls while the machine stays warm). Each phase packs its logs and
# reports into $OUT/<phase>.tgz (the tool returns at most 8 files), plus a few plain files.
#
# What is built, all for sm_90 only (the H200's arch; the legacy group adds sm_80/sm_89 SASS,
# which triples compile time and changes no code path on this GPU):
#   ours     kernel set dev, default deltas, 16 jobs, by bench/build.py (per-unit seconds and
#            peak memory through bench/measure_launcher.py); the dev wheel is then packaged
#            from the same build folder (nothing recompiles)
#            -> release paths, rescale-skip cases, validate, kernel benchmark, build benchmark
#   ci_none / ci_size   kernel set ci, fatbin compression none / size -> load cost
#   up       upstream's setup.py compile commands for the same dev units (bench/build.py
#            --upstream-mode units), 16 jobs, alone on the machine -> build benchmark
# The A-1 builds of the first lease (threshold 8 / 0 / broken) are in docs/evidence/h200-2026-11-29.
set -u
phase=${1:?usage: device_session.sh build|test|upstream}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${W:-/tmp/fa}
OUT=${OUT:-$W/out}
R=$W/results/$phase  # everything this phase reports; packed into $OUT/$phase.tgz at the end
mkdir -p "$W" "$OUT" "$R"
SDIST="$ROOT/.sdist/flash_attn-2.8.3.post2.tar.gz"
JOBS=${JOBS:-16}
KSET=${KSET:-dev} ARCHS=${ARCHS:-90}  # overridable for a rehearsal on a CPU machine (KSET=ci ARCHS=80)
OURS=$W/ours
export W ROOT SDIST JOBS OURS KSET ARCHS
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

if ls "$ROOT"/.whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site
  cmake_bin=$(python3 -c 'import cmake,os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))')
  export PATH="$(dirname "$cmake_bin"):$PATH"
fi

pack() {  # copy the phase's results back (one archive) and stop
  cp "$W"/*.log "$R/" 2>/dev/null
  tar czf "$OUT/$phase.tgz" -C "$W/results" "$phase"
  exit "${1:-0}"
}

wait_for() {  # marker-file-stem seconds: wait until <stem>.done or <stem>.failed exists
  local stem=$1 limit=$2 waited=0
  while [ ! -f "$W/$stem.done" ] && [ ! -f "$W/$stem.failed" ] && [ "$waited" -lt "$limit" ]; do
    sleep 10; waited=$((waited + 10))
    [ $((waited % 60)) = 0 ] && printf '%4ss waiting for %s %s\n' "$waited" "$stem" \
      "$(grep -ao '\[[0-9]*/[0-9]*\]' "$W/$stem.log" 2>/dev/null | tail -1)"
  done
  [ -f "$W/$stem.done" ]
}

background() {  # name command...: run detached, <name>.done / <name>.failed when it ends
  local name=$1; shift
  rm -f "$W/$name.done" "$W/$name.failed"
  setsid nohup bash -c "$* && touch '$W/$name.done' || touch '$W/$name.failed'" > "$W/$name.log" 2>&1 < /dev/null &
}

# Our measured build. The wheel is packaged from the same folder: the CMake cache keeps every
# entry (the compiler launcher too), so scikit-build-core's reconfigure finds each unit up to date.
# (Passing the launcher again with another python path would change every compile command.)
build_ours() {
  python3 "$ROOT/bench/build.py" --out "$W/bb" --sdist "$SDIST" --archs "$ARCHS" --kernel-set "$KSET" --jobs "$JOBS" \
    --build-dir "$OURS" --clean
}
build_wheel() {
  rm -rf "$W/dist"
  python3 -m build --wheel --no-isolation --skip-dependency-check -o "$W/dist" -C build-dir="$OURS" \
    -C cmake.define.FLASH_ATTN_ARCH_GROUP=custom -C cmake.define.FLASH_ATTN_CUDA_ARCHS="$ARCHS" \
    -C cmake.define.FLASH_ATTN_KERNEL_SET="$KSET" -C cmake.define.FLASH_ATTN_SDIST="$SDIST" \
    -C cmake.define.FLASH_ATTN_JOBS="$JOBS" "$ROOT"
}
start_ci_build() {  # name compression
  background "$1" cmake -S "$ROOT" -B "$W/$1" -G Ninja -DFLASH_ATTN_ARCH_GROUP=custom -DFLASH_ATTN_CUDA_ARCHS="$ARCHS" \
    -DFLASH_ATTN_SDIST="$SDIST" -DFLASH_ATTN_JOBS=4 -DFLASH_ATTN_KERNEL_SET=ci \
    -DFLASH_ATTN_FATBIN_COMPRESSION="$2" "&&" cmake --build "$W/$1"
}

case "$phase" in
build)
  {
    nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])'
    cmake --version | head -1; nvcc --version | tail -1; ninja --version
  } 2>&1 | tee "$R/machine.txt"
  if [ ! -f "$W/wheel.done" ]; then
    background wheel "$(declare -f build_ours build_wheel); build_ours && build_wheel"
  fi
  wait_for wheel "${WAIT:-560}" || { echo "wheel: not ready"; tail -40 "$W/wheel.log"; pack 1; }
  grep -E "ninja: no work|^\[[0-9]+/[0-9]+\]" "$W/wheel.log" | tail -5
  cp "$W/bb/build.json" "$W/bb/build.md" "$R/" 2>/dev/null
  wheel=$(ls "$W"/dist/flash_attn-*.whl | head -1)
  ls -l "$wheel"; sha256sum "$wheel" | tee "$R/wheel.sha256"
  # bring the wheel back for later leases (the tool returns files up to 16 MiB)
  split -b 15M -d "$wheel" "$OUT/$(basename "$wheel").part"
  pack 0
  ;;
test)
  wheel=${WHEEL:-}
  if [ -z "$wheel" ]; then
    wait_for wheel "${WAIT:-300}" || { echo "wheel: not ready"; tail -40 "$W/wheel.log"; pack 1; }
    wheel=$(ls "$W"/dist/flash_attn-*.whl | head -1)
  fi
  wheel=$(readlink -f "$wheel")
  start_ci_build ci_none none
  start_ci_build ci_size size
  rm -rf "$W/site_dev"; python3 -m pip install -q --no-deps --no-index --target "$W/site_dev" "$wheel" || pack 3
  lib=$(ls "$W"/site_dev/flash_attn/_C_*.so | head -1)
  cd "$W"  # never import the checkout's flash_attn/
  rc=0
  set -o pipefail
  # correctness first (the ci builds compile meanwhile; nothing here is timed)
  PYTHONPATH="$W/site_dev:${PYTHONPATH:-}" python3 -m flash_attn 2>&1 | tee "$R/build_info.txt"
  PYTHONPATH="$W/site_dev:${PYTHONPATH:-}" python3 "$ROOT/tests/gpu/release_paths.py" --dtype all 2>&1 | tee "$R/release_paths.txt" || rc=1
  python3 "$ROOT/tests/gpu/rescale_skip.py" --lib "$lib" --dims 64,128 2>&1 | tee "$R/rescale_skip_dev.txt" | tail -25 || rc=1
  wait_for ci_none 240; wait_for ci_size 240
  # timed work on a quiet machine
  PYTHONPATH="$W/site_dev:${PYTHONPATH:-}" python3 "$ROOT/src/release/validate.py" --out "$R" --wheel "$wheel" 2>&1 | tee "$R/validate.txt" | tail -60 || rc=1
  python3 "$ROOT/bench/kernels.py" --out "$R" --build "dev=$W/site_dev" 2>&1 | tee "$R/bench_kernels.txt" | tail -45 || rc=1
  if [ -f "$W/ci_none.done" ] && [ -f "$W/ci_size.done" ]; then
    python3 "$ROOT/bench/load_cost.py" --build none="$W/ci_none" --build size="$W/ci_size" --out "$R" 2>&1 | tee "$R/load_cost.txt" | tail -20
  else
    echo "load cost: ci builds failed"; tail -20 "$W"/ci_*.log
  fi
  # upstream's build of the same units, alone on the machine, collected by the next call
  if [ -f "$W/bb/build.json" ] && [ ! -d "$W/up" ]; then
    python3 "$ROOT/bench/build.py" --upstream-background "$W/up" --upstream-mode units --sdist "$SDIST" \
      --archs "$ARCHS" --kernel-set "$KSET" --jobs "$JOBS"
  fi
  pack $rc
  ;;
upstream)
  python3 "$ROOT/bench/build.py" --out "$W/bb" --reuse-ours --collect "$W/up" --wait-s "${WAIT:-560}" 2>&1 | tee "$R/collect.txt"
  cp "$W/bb/build.json" "$W/bb/build.md" "$R/" 2>/dev/null
  cp "$W"/up/*.log "$W"/up/*.json "$R/" 2>/dev/null
  cat "$R/build.md" 2>/dev/null | head -80
  pack 0
  ;;
*) echo "usage: device_session.sh build|test|upstream" >&2; exit 2 ;;
esac
