#!/usr/bin/env bash
# GPU evidence on one H200 (sm_90), in two calls of the device tool over one machine lease:
#
#   bash tests/gpu/device_session.sh build   # starts every build in the background, waits <= 9 min
#   bash tests/gpu/device_session.sh test    # waits for the builds, then runs every GPU check
#
# Needs, carried with the working tree (ignored by git): .whl/ (cmake, scikit-build-core, wheel,
# pathspec wheels for Python 3.12) and .sdist/flash_attn-2.8.3.post2.tar.gz. Builds live in
# /tmp/fa (kept between the two calls while the machine stays warm); logs and reports go to $OUT.
#
# Builds, all for sm_90 only (the H200's arch; the legacy group adds sm_80/sm_89 SASS, which
# costs 3x the compile time and changes no code path on this GPU):
#   dev      wheel, kernel set dev, default deltas (A-1 threshold 8, A-2 on), all 16 cores
#            -> release paths, validate, kernel benchmark, .ninja_log for the build benchmark
#   ci_none / ci_size  kernel set ci with fatbin compression none / size (test phase) -> load cost
#   A1=1 adds the A-1 builds (done on 2026-11-29, docs/evidence/):
#   a1_t8 / a1_t0 / a1_bad  forward units D 64/128/256 with threshold 8 / 0 / broken -> A-1 tests, latency
# Lesson of 2026-11-29: six builds at once left the dev wheel half built after 20 minutes; the
# machine goes back 30 s after a call, so call `test` right after `build` returns.
set -u
phase=${1:?usage: device_session.sh build|test}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=/tmp/fa
OUT=${OUT:-$W/out}
mkdir -p "$W" "$OUT"
export W OUT ROOT
SDIST="$ROOT/.sdist/flash_attn-2.8.3.post2.tar.gz"
export SDIST
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
cmake_bin=$(python3 -c 'import cmake,os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))')
export PATH="$(dirname "$cmake_bin"):$PATH"

start_cmake_build() {  # name jobs kernel_set extra-defines...
  local name=$1 jobs=$2 set=$3; shift 3
  [ -f "$W/$name.done" ] && return
  setsid nohup bash -c "
    start=\$(date +%s)
    cmake -S '$ROOT' -B '$W/$name' -G Ninja -DFLASH_ATTN_ARCH_GROUP=custom -DFLASH_ATTN_CUDA_ARCHS=90 \
      -DFLASH_ATTN_SDIST='$SDIST' -DFLASH_ATTN_JOBS=$jobs '-DFLASH_ATTN_KERNEL_SET=$set' $* &&
    cmake --build '$W/$name' && echo \$(( \$(date +%s) - start )) > '$W/$name.done' || touch '$W/$name.failed'
  " > "$W/$name.log" 2>&1 < /dev/null &
}

build_dev_wheel() {  # incremental: a second call only repackages (picks up current Python files)
  rm -rf "$W/dist"
  python3 -m build --wheel --no-isolation --skip-dependency-check -o "$W/dist" -C build-dir="$W/dev" \
    -C cmake.define.FLASH_ATTN_ARCH_GROUP=custom -C cmake.define.FLASH_ATTN_CUDA_ARCHS=90 \
    -C cmake.define.FLASH_ATTN_KERNEL_SET=dev -C cmake.define.FLASH_ATTN_SDIST="$SDIST" \
    -C cmake.define.FLASH_ATTN_JOBS=${DEV_JOBS:-16} "$ROOT"
}

if [ "$phase" = build ]; then
  nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])'
  cmake --version | head -1; nvcc --version | tail -1
  if [ ! -f "$W/dev.done" ]; then
    setsid nohup bash -c "start=\$(date +%s); $(declare -f build_dev_wheel); build_dev_wheel && echo \$(( \$(date +%s) - start )) > '$W/dev.done' || touch '$W/dev.failed'" > "$W/dev.log" 2>&1 < /dev/null &
  fi
  if [ "${A1:-0}" = 1 ]; then
    start_cmake_build a1_t8 4 'fwd_hdim64_*,fwd_hdim128_*,fwd_hdim256_*'
    start_cmake_build a1_t0 4 'fwd_hdim64_*,fwd_hdim128_*,fwd_hdim256_*' -DFLASH_ATTN_RESCALE_THRESHOLD=0
    start_cmake_build a1_bad 1 'fwd_hdim128_fp16*' -DFLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET=ON
  fi
  limit=${WAIT:-530}
else
  limit=${WAIT:-400}
fi

names="dev"
[ "${A1:-0}" = 1 ] && names="$names a1_t8 a1_t0 a1_bad"
waited=0
while :; do
  pending=""
  for n in $names; do [ -f "$W/$n.done" ] || [ -f "$W/$n.failed" ] || pending="$pending $n"; done
  [ -z "$pending" ] && break
  [ "$waited" -ge "$limit" ] && break
  sleep 20; waited=$((waited + 20))
  printf '%4ss pending:%s | dev %s\n' "$waited" "$pending" "$(grep -o '\[[0-9]*/[0-9]*\]' "$W/dev/build.ninja" "$W/dev.log" 2>/dev/null | tail -1)"
done
for n in $names; do
  if [ -f "$W/$n.done" ]; then echo "$n: built in $(cat "$W/$n.done") s"
  elif [ -f "$W/$n.failed" ]; then echo "$n: FAILED"; tail -30 "$W/$n.log"
  else echo "$n: still building: $(tail -c 300 "$W/$n.log" | tr '\n' ' ')"; fi
done
cp "$W"/*.log "$OUT/" 2>/dev/null
[ "$phase" = build ] && exit 0

# ---- test phase -------------------------------------------------------------------------------
set -o pipefail
[ -f "$W/dev.done" ] && { build_dev_wheel > "$OUT/dev_rebuild.log" 2>&1 || echo "dev wheel repackaging FAILED"; grep -E "^\[|ninja: no work" "$OUT/dev_rebuild.log" | tail -3; }
wheel=$(ls "$W"/dist/flash_attn-*.whl 2>/dev/null | head -1)
rc=0
if [ -n "$wheel" ]; then
  rm -rf "$W/site_dev"; python3 -m pip install -q --no-deps --no-index --target "$W/site_dev" "$wheel"
  export PYTHONPATH="$W/site_dev:/tmp/site"
  cd "$W"  # never import the checkout's flash_attn/
  python3 -m flash_attn 2>&1 | tee "$OUT/build_info.txt"
  python3 "$ROOT/tests/gpu/release_paths.py" --dtype all 2>&1 | tee "$OUT/release_paths.txt" || rc=1
  python3 "$ROOT/src/release/validate.py" --out "$OUT" --wheel "$wheel" 2>&1 | tail -80 | tee "$OUT/validate.txt" || rc=1
  python3 "$ROOT/bench/kernels.py" --out "$OUT" --build "dev=$W/site_dev" 2>&1 | tail -60 | tee "$OUT/bench_kernels.txt" || rc=1
  cp "$W/dev/.ninja_log" "$OUT/dev.ninja_log" 2>/dev/null  # per-unit compile times for bench/build.py
  # Load cost: two tiny builds that differ only in fatbin compression (8 jobs each, side by side).
  start_cmake_build ci_none 8 ci -DFLASH_ATTN_FATBIN_COMPRESSION=none
  start_cmake_build ci_size 8 ci -DFLASH_ATTN_FATBIN_COMPRESSION=size
  while [ ! -f "$W/ci_none.done" ] || [ ! -f "$W/ci_size.done" ]; do
    [ -f "$W/ci_none.failed" ] || [ -f "$W/ci_size.failed" ] && break; sleep 5
  done
fi
export PYTHONPATH=/tmp/site
cd "$W"
if [ -f "$W/a1_t8.done" ]; then
  python3 "$ROOT/tests/gpu/rescale_skip.py" --lib "$W/a1_t8/_C_custom.so" --save "$W/t8.pt" 2>&1 | tail -60 | tee "$OUT/a1_t8.txt" || rc=1
  [ -f "$W/a1_t0.done" ] && { python3 "$ROOT/tests/gpu/rescale_skip.py" --lib "$W/a1_t0/_C_custom.so" --compare-to "$W/t8.pt" 2>&1 | tail -40 | tee "$OUT/a1_t0_vs_t8.txt" || rc=1; }
  [ -f "$W/a1_bad.done" ] && { python3 "$ROOT/tests/gpu/rescale_skip.py" --lib "$W/a1_bad/_C_custom.so" --dims 128 2>&1 | tail -30 | tee "$OUT/a1_broken.txt"; echo "broken variant exit status: $? (must be non-zero)" | tee -a "$OUT/a1_broken.txt"; }
  [ -f "$W/a1_t0.done" ] && python3 "$ROOT/tests/gpu/latency_a1.py" --lib "$W/a1_t8/_C_custom.so" --label A-1 --lib "$W/a1_t0/_C_custom.so" --label threshold-0 --json "$OUT/latency_a1.json" 2>&1 | tee "$OUT/latency_a1.txt"
fi
if [ -f "$W/ci_none.done" ] && [ -f "$W/ci_size.done" ]; then
  python3 "$ROOT/bench/load_cost.py" --build none="$W/ci_none" --build size="$W/ci_size" --out "$OUT" 2>&1 | tail -30 | tee "$OUT/load_cost.txt"
fi
exit $rc
