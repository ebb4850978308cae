#!/usr/bin/env bash
# GPU evidence on one H200 (sm_90): one phase per call of the device tool, all calls in one machine
# lease (the machine goes back 30 s after a call: make the next call at once). lab/README.md says
# what each phase returns; lab/evidence/ holds what the runs found.
#
#   bash lab/device_session.sh PHASE     (phases by what they measure; the issue that added each
#                                          in brackets, as the evidence folders name them)
#
# Build time
#   build      our measured dev build + the dev wheel (~8-9 min)
#   upstream   waits for upstream's build of the same units (started by `test`), writes the build
#              report
#   shards     [issue 13] call it until it says "shards: all done" (~4 calls): the dev set as SHARDS
#              (4x4) shard builds at once, gathered and linked (bench/build.py --sharded --only
#              sharded, detached); then on that wheel release paths, rescale-skip, opcheck and the
#              kernel benchmark with host overhead; then the unsharded build of the same set (SHARDS
#              N*M jobs, detached); then the report build_sharded.md. Each call skips what is done.
#   unsharded  the shards phase's unsharded build alone, first in a lease (~7 min)
#
# Correctness on the GPU
#   test       GPU checks and benchmarks on a quiet machine (~6 min), then starts upstream's build
#              in the background
#   tree       a local upstream tree (.trees/<name>.tar.gz, e.g. upstream main): its wheel for sm_90,
#              release paths + dropout (~8 min; call it again if it says the build is not ready)
#   opcheck    KSET=... : a small set straight into a wheel, then opcheck and the P-padding probe
#              on it (~5 min for two units)
#   stable     [issue 15] after the shards phase's sharded part (same lease): links the stable-ABI
#              wheel from its kernels archive, runs the GPU checks on it, dropout bit for bit against
#              the exact wheel (lab/dropout_identity.py), dropout under CUDA-graph capture in both,
#              and the kernel benchmark of both (~6 min)
#
# Latency and host time
#   bench      the timed steps of `test` alone (validate, kernel benchmark with the host-overhead
#              table), on the dev wheel of `build`
#   host       [issue 14] call it until it says "host: all done" (~3 calls): the dev set's kernels
#              once (detached), then each call relinks the exact and the stable-ABI wheel from them,
#              opcheck and lab/host_profile.py on both, the kernel benchmark of both with the
#              host-overhead table (HOST_STEPS picks; BENCH_ROUNDS 3)
#
# Drop-in use
#   dropin     [issue 24] call it until it says "dropin: all done" (~4 calls): the same two wheels
#              as `host`, then upstream's own tests (release.ship.upstream_tests) and transformers'
#              flash_attention_2 path (tests/gpu/test_transformers_fa2.py) on each; OFFICIAL=0 leaves out
#              the first call's run of test_rotary.py on upstream's own modules, UP_ABIS (exact stable)
#              picks and orders the wheels whose upstream tests run
#
# The release set
#   release    [issue 38] call it until it says "release: all done" (~3 calls, ~27 device minutes): the
#              release kernel set (72 units) for sm_90 as the release workflow builds it: SHARDS (4x4)
#              shard builds at once, gathered, the exact wheel linked (bench/build.py --sharded, detached),
#              the stable-ABI wheel linked from the same gathered archive as soon as it exists; then on
#              each wheel `python -m flash_attn` with its import time and sizes, transformers'
#              flash_attention_2 test and upstream's own tests (UP_SAMPLE, default 1500, every test
#              function; the summary counts per kernel head dim; both wheels at once with half the
#              workers each on a GPU of 120 GiB or more, else one after the other). REL_KSET picks
#              another kernel set (lab/evidence/h100-2026-12-07-release-partial: head dims 32, 192, 256;
#              the whole set: lab/evidence/h100-2026-12-07-release-full). Returns the shards' .ninja_log files
#              (per-unit compile seconds: lab/unit_costs.py). BENCH=1 adds the kernel benchmark.
#
# Switches (environment): JOBS (16) and TREE_JOBS (JOBS) size the two builds; WITH_TREE=1 starts the
# tree's build beside ours in the build phase (both fit 128 GB at JOBS=12 TREE_JOBS=6); TIMED=0 leaves
# the timed steps out of `test` (run `bench` next); LOAD_COST=0 skips the ci builds and the load-cost
# benchmark; UPSTREAM=0 does not start upstream's build at the end of `test`. SHARDS (4x4: shards x
# jobs per shard) sizes the shards phase; SHARD_BENCH=0 leaves its kernel benchmark to the stable phase;
# SHARD_TESTS=0 leaves its GPU steps out (a CPU rehearsal with
# FLASH_ATTN_BENCH_SHARDED_FAKE=1, whose stub release steps compile nothing: see bench/build_sharded.py).
# SHARDED_JSON=<carried sharded.json from shards.tgz> lets a fresh lease run only the unsharded part and
# the report, when the first lease ran out before it (the report then compares two leases of one kind).
#
# A later lease can rerun the GPU checks without building: `build` (or `test`, if it was the
# call that waited for the wheel) returns the wheel as $OUT/<wheel>.partNN pieces of 15 MiB;
# join them (cat) into an ignored folder, carry it, and run WHEEL=that/flash_attn-...whl ... test.
# Each phase stops its own steps before the tool's 600 s limit (PHASE_S, default 570 s) so its
# results always come back; builds started in the background keep running for the next call.
#
# Needs, carried with the working tree (ignored by git): .whl/ (cmake, scikit-build-core, wheel,
# pathspec wheels for Python 3.12) and .sdist/flash_attn-<upstream pin>.tar.gz; the tree phase also
# .trees/<name>.tar.gz (root holding csrc/flash_attn and flash_attn/__init__.py; CUTLASS comes from
# the pinned sdist, as for `--cutlass-dir`). Work lives in
# /tmp/fa (kept between calls while the machine stays warm). Each phase packs its logs and
# reports into $OUT/<phase>.tgz (the tool returns at most 8 files), plus a few plain files.
#
# What is built, all for sm_90 only (the H200's arch; the legacy group adds sm_80/sm_89 SASS,
# which triples compile time and changes no code path on this GPU):
#   ours     kernel set dev, default deltas, 16 jobs, by bench/build.py (per-unit seconds and
#            peak memory through bench/measure_launcher.py); the dev wheel is then packaged
#            from the same build folder (nothing recompiles)
#            -> release paths, rescale-skip cases, opcheck of every operator, validate, kernel
#               benchmark with the host-overhead table, build benchmark
#   ci_none / ci_size   kernel set ci, fatbin compression none / size -> load cost
#   up       upstream's setup.py compile commands for the same dev units (bench/build.py
#            --upstream-mode units), 16 jobs, alone on the machine -> build benchmark
# The A-1 builds of the first lease (threshold 8 / 0 / broken) are in lab/evidence/h200-2026-11-29.
set -u
phase=${1:?usage: device_session.sh build|test|upstream|tree|bench|opcheck|shards|unsharded|stable|host|dropin|release}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${W:-/tmp/fa}
OUT=${OUT:-$W/out}
R=$W/results/$phase  # everything this phase reports; packed into $OUT/$phase.tgz at the end
rm -rf "$R"
mkdir -p "$W" "$OUT" "$R"
# the upstream pin (version) of build-manifest.json, read with the stdlib as .ci/run reads its pins
UPSTREAM=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["upstream"]["version"])' "$ROOT/build-manifest.json")
SDIST="$ROOT/.sdist/flash_attn-$UPSTREAM.tar.gz"
JOBS=${JOBS:-16}
KSET=${KSET:-dev} ARCHS=${ARCHS:-90}  # overridable for a rehearsal on a CPU machine (KSET=ci ARCHS=80)
OURS=$W/ours
DEADLINE=$(( $(date +%s) + ${PHASE_S:-570} ))
export W ROOT UPSTREAM SDIST JOBS OURS KSET ARCHS UP_SAMPLE UP_SEED UP_JOBS
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

if ls "$ROOT"/.whl/*.whl > /dev/null 2>&1; then
  # Installed once per machine: reinstalling would replace CMake's files under a build that a
  # background job of an earlier call is configuring (seen: "include could not find requested file").
  stamp=$(cd "$ROOT/.whl" && stat -c '%n %s' -- *.whl | sha256sum | cut -c1-16)  # names and sizes (the copy's mtimes vary)
  if [ "$(cat /tmp/site/.carried 2>/dev/null)" != "$stamp" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl || exit 3
    echo "$stamp" > /tmp/site/.carried
  fi
  export PYTHONPATH=/tmp/site
  cmake_bin=$(python3 -c 'import cmake,os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))')
  PATH="$(dirname "$cmake_bin"):$PATH"
  export PATH
fi
# bench/ and tools/ import the release package's stdlib helpers (release.manifest, the smoke check's reader)
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
SITE="$W/site_dev:$PYTHONPATH"  # the installed wheel first

rc=0
finish() {  # on every exit: copy the phase's results back as one archive
  cp "$W"/*.log "$R/" 2>/dev/null
  tar czf "$OUT/$phase.tgz" -C "$W/results" "$phase"
}
trap finish EXIT

left() {  # seconds left before this phase must stop (never below 1)
  local s=$(( DEADLINE - $(date +%s) - ${1:-0} ))
  [ "$s" -lt 1 ] && s=1
  echo "$s"
}

running() {  # name: a background job of that name is alive
  [ -f "$W/$1.pid" ] && kill -0 "$(cat "$W/$1.pid")" 2> /dev/null
}

wait_for() {  # name seconds: wait until <name>.done or <name>.failed exists, or the job died
  local name=$1 limit=$2 waited=0
  while [ ! -f "$W/$name.done" ] && [ ! -f "$W/$name.failed" ] && running "$name" && [ "$waited" -lt "$limit" ]; do
    sleep 10; waited=$((waited + 10))
    [ $((waited % 60)) = 0 ] && printf '%4ss waiting for %s %s\n' "$waited" "$name" \
      "$(grep -ao '\[[0-9]*/[0-9]*\]' "$W/$name.log" 2>/dev/null | tail -1)"
  done
  [ -f "$W/$name.done" ]
}

step() {  # name reserve command...: run it into $R/<name>.txt, leaving `reserve` s for later steps
  local name=$1 reserve=$2 limit status
  shift 2
  limit=$(left "$reserve")
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  status=$?
  [ "$status" = 124 ] && echo "$name: stopped after $limit s (this phase's time ran out)" >> "$R/$name.txt"
  tail -n 30 "$R/$name.txt"
  return "$status"
}

background() {  # name function [functions it calls...]: run the function detached
  local name=$1 fn=$2
  if running "$name"; then echo "$name: already running (pid $(cat "$W/$name.pid"))"; return; fi
  rm -f "$W/$name.done" "$W/$name.failed"
  setsid nohup bash -c "$(declare -f "${@:2}"); $fn && touch '$W/$name.done' || touch '$W/$name.failed'" \
    > "$W/$name.log" 2>&1 < /dev/null &
  echo $! > "$W/$name.pid"
}

# Our measured build. The wheel is packaged from the same folder: the CMake cache keeps every
# entry (the compiler launcher too), so scikit-build-core's reconfigure finds each unit up to date.
# (Passing the launcher again with another python path would change every compile command.)
build_ours_and_wheel() {
  python3 "$ROOT/bench/build.py" --out "$W/bb" --sdist "$SDIST" --archs "$ARCHS" --kernel-set "$KSET" \
    --jobs "$JOBS" --build-dir "$OURS" --clean && build_wheel
}
build_wheel() {  # incremental: after the build it only repackages (and picks up current Python files)
  rm -rf "$W/dist"
  python3 -m build --wheel --no-isolation --skip-dependency-check -o "$W/dist" -C build-dir="$OURS" \
    -C cmake.define.FLASH_ATTN_ARCH_GROUP=custom -C cmake.define.FLASH_ATTN_CUDA_ARCHS="$ARCHS" \
    -C cmake.define.FLASH_ATTN_KERNEL_SET="$KSET" -C cmake.define.FLASH_ATTN_SDIST="$SDIST" \
    -C cmake.define.FLASH_ATTN_JOBS="$JOBS" "$ROOT"
}
ci_build() {  # $CI_NAME, $CI_COMPRESSION: kernel set ci, 4 jobs
  cmake -S "$ROOT" -B "$W/$CI_NAME" -G Ninja -DFLASH_ATTN_ARCH_GROUP=custom "-DFLASH_ATTN_CUDA_ARCHS=$ARCHS" \
    "-DFLASH_ATTN_SDIST=$SDIST" -DFLASH_ATTN_JOBS=4 -DFLASH_ATTN_KERNEL_SET=ci \
    "-DFLASH_ATTN_FATBIN_COMPRESSION=$CI_COMPRESSION" && cmake --build "$W/$CI_NAME"
}
start_ci_build() {  # name compression
  CI_NAME=$1 CI_COMPRESSION=$2
  export CI_NAME CI_COMPRESSION
  background "$1" ci_build
}
# A local tree (tree phase): kernel set TREE_KSET (head dim 64, forward, split-KV and backward: every
# path release_paths.py runs at D=64), default deltas, built straight into a wheel.
TREE_KSET=${TREE_KSET:-fwd_hdim64_*,bwd_hdim64_*,fwd_split_hdim64_*}
tree_wheel() {
  local tgz root
  tgz=${TREE_TGZ:-$(ls "$ROOT"/.trees/*.tar.gz 2>/dev/null | head -1)}
  [ -f "$tgz" ] || { echo "no tree: carry .trees/<name>.tar.gz (or set TREE_TGZ)"; return 1; }
  rm -rf "$W/tree" "$W/tree_dist" && mkdir -p "$W/tree/src" "$W/tree/pin" || return 1
  tar xzf "$tgz" -C "$W/tree/src" || return 1
  root=$(dirname "$(find "$W/tree/src" -path '*/csrc/flash_attn/src/flash.h' | head -1)")/../../..
  tar xzf "$SDIST" -C "$W/tree/pin" "flash_attn-$UPSTREAM/csrc/cutlass/include" || return 1
  echo "tree: $tgz -> $(readlink -f "$root")"
  python3 -m build --wheel --no-isolation --skip-dependency-check -o "$W/tree_dist" -C build-dir="$W/tree/build" \
    -C cmake.define.FLASH_ATTN_ARCH_GROUP=custom -C cmake.define.FLASH_ATTN_CUDA_ARCHS="$ARCHS" \
    -C cmake.define.FLASH_ATTN_KERNEL_SET="$TREE_KSET" -C cmake.define.FLASH_ATTN_JOBS="${TREE_JOBS:-$JOBS}" \
    -C cmake.define.FLASH_ATTN_SOURCE_DIR="$(readlink -f "$root")" \
    -C cmake.define.FLASH_ATTN_CUTLASS_DIR="$W/tree/pin/flash_attn-$UPSTREAM/csrc/cutlass/include" "$ROOT"
}
export TREE_KSET TREE_JOBS
host_build() {  # the host phase's kernels (and a first exact wheel): release.sessions.wheels compiles and archives them
  python3 -m release.sessions.wheels --arch-group custom --cuda-archs "$ARCHS" --kernel-set "$KSET" --sdist "$SDIST" \
    --jobs "$JOBS" --torch-abi exact --no-smoke --build-root "$W/host_root" --out "$W/host_first"
}
timed_steps() {  # wheel: validation report and kernel benchmark (with host overhead) on a quiet machine
  PYTHONPATH="$SITE" step validate 150 python3 "$ROOT/tools/validate.py" --out "$R" --wheel "$1" || rc=1
  step bench_latency 70 python3 "$ROOT/bench/latency.py" --out "$R" --build "dev=$W/site_dev" --host-overhead || rc=1
}
return_wheel() {  # the wheel back to this machine, in pieces the tool accepts (16 MiB each)
  split -b 15M -d "$1" "$OUT/$(basename "$1").part"
  sha256sum "$1" | tee "$R/wheel.sha256"
}

link_both() {  # phase: the exact and the stable-ABI wheel linked from $HOST_ROOT's kernels archive (the
  # binding alone compiles), each installed into $W/site_<abi>; sets $key (both wheels' sha256 prefixes)
  local abi wheel kernels
  kernels=$(ls -d "$HOST_ROOT"/kernels-*/archive/kernels-* 2>/dev/null | head -1)
  [ -n "$kernels" ] || { echo "$1: no kernels archive under $HOST_ROOT"; return 1; }
  cd "$W" || exit 3  # never import the checkout's flash_attn/
  # two links of about a minute each, beyond the 200 s each link step leaves for the later steps: with
  # less time left, stop cleanly rather than kill one midway (seen: a link given 1 s)
  [ "$(left 200)" -ge 150 ] || { echo "$1: the build finished late in this call; call the $1 phase again at once"; return 1; }
  key=""
  stamp=$(cd "$ROOT" && find flash_attn flash_attn_2_cuda.py src/binding src/kernels cmake CMakeLists.txt pyproject.toml \
    build-manifest.json -type f | sort | xargs sha256sum | sha256sum | cut -c1-16)
  if [ "$(cat "$W/linked.stamp" 2>/dev/null)" = "$stamp" ]; then  # linked by an earlier call from these sources
    for abi in exact stable; do key="$key$(sha256sum < "$(ls "$W/host_$abi"/flash_attn-*.whl | head -1)" | cut -c1-12)"; done
    echo "$1: both wheels linked by an earlier call of this lease"; return 0
  fi
  rm -f "$W/linked.stamp"
  for abi in exact stable; do
    rm -rf "$W/host_$abi"
    step "link_$abi" 200 python3 -m release.sessions.wheels --arch-group custom --cuda-archs "$ARCHS" --kernel-set "$KSET" \
      --sdist "$SDIST" --jobs "$JOBS" --kernels "$kernels" --torch-abi "$abi" --no-smoke \
      --build-root "$HOST_ROOT" --out "$W/host_$abi" > /dev/null || { echo "$1: linking the $abi wheel failed"; tail -n 30 "$R/link_$abi.txt"; return 1; }
    wheel=$(ls "$W/host_$abi"/flash_attn-*.whl | head -1)
    sha256sum "$wheel" | tee "$R/wheel_$abi.sha256"
    key="$key$(sha256sum < "$wheel" | cut -c1-12)"
    rm -rf "$W/site_$abi"; python3 -m pip install -q --no-deps --no-index --target "$W/site_$abi" "$wheel" || exit 3
  done
  echo "$stamp" > "$W/linked.stamp"
}

rotary_official() {  # upstream's test_rotary.py against upstream's own flash_attn package from the pinned
  # sdist, no wheel of ours (an empty flash_attn_2_cuda module: the rotary tests never call the extension),
  # 4 pytest-xdist workers beside the kernel build; the environment facts of the known failures first
  local d=$W/official
  rm -rf "$d" && mkdir -p "$d/site" && tar xzf "$SDIST" -C "$d" "flash_attn-$UPSTREAM/flash_attn" "flash_attn-$UPSTREAM/tests/test_rotary.py" || return 3
  mv "$d/flash_attn-$UPSTREAM/flash_attn" "$d/site/" && : > "$d/site/flash_attn_2_cuda.py"
  cd "$d" || return 3
  PYTHONPATH="$d/site" python3 -c 'import torch, triton; from triton.runtime.jit import JITFunction; import flash_attn
print("torch", torch.__version__, "triton", triton.__version__, "JITFunction.cache_hook:", hasattr(JITFunction, "cache_hook"), "flash_attn from", flash_attn.__file__)'
  PYTHONPATH="$d/site" python3 -m pytest -c /dev/null -p no:cacheprovider -q -rfE --tb=line -n 4 "flash_attn-$UPSTREAM/tests/test_rotary.py"
}

up_tests() {  # abi: upstream's tests (release.ship.upstream_tests) on the $abi wheel, run detached
  local abi=$1 wheel
  wheel=$(ls "$W/host_$abi"/flash_attn-*.whl | head -1)
  cd "$W" && PYTHONPATH="$W/tree_$abi/src:$W/site_$abi:/tmp/site" python3 -m release.ship.upstream_tests --wheel "$wheel" \
    --sdist "$SDIST" --sample "${UP_SAMPLE:-3000}" --seed "${UP_SEED:-24}" --jobs "${UP_JOBS:-8}" \
    --out "$W/once/up_$abi" -- -p no:cacheprovider
}
up_exact() { up_tests exact; }
up_stable() { up_tests stable; }

built_and_linked() {  # phase: the dev kernels compiled once (detached: host_build), both wheels linked
  # from them (link_both); the phase's earlier results are dropped when the wheels changed
  HOST_ROOT=$W/host_root
  [ -f "$W/hostbuild.done" ] || background hostbuild host_build
  wait_for hostbuild "$(left 30)" || {
    if [ -f "$W/hostbuild.failed" ]; then echo "$1: the dev build failed"; else echo "$1: the dev build is not ready (call the $1 phase again at once; it keeps building)"; fi
    tail -n 8 "$W/hostbuild.log"; return 1
  }
  link_both "$1" || return 1
  [ "$(cat "$W/once/$1_key" 2>/dev/null)" = "$key" ] || { rm -rf "$W"/once/"$1"_*; mkdir -p "$W/once"; echo "$key" > "$W/once/$1_key"; }
}

once() {  # name reserve command...: step, unless an earlier call of this lease finished it (its
  # output and exit status are kept in $W/once/); a step stopped by the phase's deadline runs again
  local name=$1 status
  mkdir -p "$W/once"
  if [ -f "$W/once/$name.rc" ]; then
    cp "$W/once/$name.txt" "$R/" 2>/dev/null
    echo "$name: done in an earlier call (exit $(cat "$W/once/$name.rc")); skipped"
    return "$(cat "$W/once/$name.rc")"
  fi
  step "$@"
  status=$?
  if [ "$status" != 124 ]; then cp "$R/$name.txt" "$W/once/"; echo "$status" > "$W/once/$name.rc"; fi
  return "$status"
}
# The shards phase (bench/build_sharded.py): both parts write into $W/bs.
SHARDS=${SHARDS:-4x4}
export SHARDS
sharded_part() {
  python3 "$ROOT/bench/build.py" --out "$W/bs" --sharded "$SHARDS" --only "$1" --kernel-set "$KSET" \
    --archs "$ARCHS" --sdist "$SDIST"
}
sharded_build() { sharded_part sharded; }
unsharded_build() { sharded_part unsharded; }
shards_machine() {  # the machine of the shards phase's builds, written once per lease
  [ -f "$W/shards_machine.txt" ] || {
    nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])'
    cmake --version | head -1; nvcc --version | tail -1; ninja --version
  } > "$W/shards_machine.txt" 2>&1
  cp "$W/shards_machine.txt" "$R/machine.txt"
}
shard_progress() {  # the last progress line of each build of the shards phase (release.compile.progress)
  local f
  for f in "$W"/bs/sharded/logs/*.log "$W"/bs/unsharded/logs/*.log; do
    [ -f "$f" ] && printf '%s: %s\n' "$(basename "$f" .log)" "$(tr '\r' '\n' < "$f" | grep -a 'kernel units\|edges' | tail -1)"
  done
}
wait_part() {  # name function: start the part detached unless done or running, wait for it; 1 if not done
  [ -f "$W/$1.done" ] && return 0
  [ -f "$W/$1.failed" ] && ! running "$1" && { echo "$1: failed in an earlier call; rm $W/$1.failed to retry"; return 1; }
  background "$1" "$2" sharded_part
  wait_for "$1" "$(left 25)" && return 0
  if [ -f "$W/$1.failed" ]; then echo "$1: failed"; tail -n 25 "$W/$1.log"
  else echo "$1: still running (call the shards phase again at once; it keeps building)"; shard_progress; fi
  return 1
}

build_preflight() {  # phase: release.sessions.wheels builds with `python -m build --no-isolation` and its
  # dependency check (pyproject's build requires: scikit-build-core, cmake, ninja as Python packages)
  # and retags with `wheel`
  [ "${FLASH_ATTN_BENCH_SHARDED_FAKE:-0}" = 1 ] && return 0
  python3 -c 'import build, packaging, wheel, ninja, scikit_build_core' 2> "$R/preflight.txt" && return 0
  echo "$1: missing Python packages ($(tail -1 "$R/preflight.txt")); carry their wheels in .whl/ (build, packaging, wheel>=0.48, ninja, scikit-build-core, cmake, pathspec)"
  return 1
}

# The release phase: the stable-ABI wheel from the sharded part's gathered archive ($KERNELS)
stable_link() {
  python3 -m release.sessions.wheels --arch-group custom --cuda-archs "$ARCHS" --kernel-set "$KSET" --sdist "$SDIST" \
    --jobs "$JOBS" --kernels "$KERNELS" --torch-abi stable --no-smoke --build-root "$W/stable_root" --out "$W/host_stable"
}
release_wait() {  # the sharded part (detached), and the stable link once its gathered archive exists;
  # 0 when the sharded part is done, 1 when it failed, 2 when this call's time ran out
  local waited=0
  [ -f "$W/sharded.done" ] || [ -f "$W/sharded.failed" ] || running sharded || background sharded sharded_build sharded_part
  while :; do
    KERNELS=$(ls -d "$W"/bs/sharded/gathered/kernels-* 2>/dev/null | head -1)
    export KERNELS
    if [ -n "$KERNELS" ] && [ ! -f "$W/stablelink.done" ] && [ ! -f "$W/stablelink.failed" ] && ! running stablelink; then
      background stablelink stable_link
    fi
    [ -f "$W/sharded.done" ] && return 0
    { [ -f "$W/sharded.failed" ] || ! running sharded; } && return 1
    [ "$(left 40)" -le 1 ] && return 2
    sleep 10; waited=$((waited + 10))
    [ $((waited % 60)) = 0 ] && { printf '%4ss building:\n' "$waited"; shard_progress; }
  done
}
release_report() {  # what the release phase returns besides its step outputs: records, logs, ninja logs
  local f k
  cp "$W"/bs/*.json "$W"/bs/build_sharded.md "$R/" 2>/dev/null
  cp "$W"/bs/sharded/logs/*.log "$W/stablelink.log" "$R/" 2>/dev/null
  for f in "$W"/bs/sharded/root-*/kernels-*/.ninja_log; do
    [ -f "$f" ] || continue
    k=$(echo "$f" | sed -n 's|.*/root-\([0-9]*\)/.*|\1|p')
    cp "$f" "$R/ninja_log_shard$k.txt"
  done
}
release_facts() {  # abi: the installed wheel's build info, import time, wheel and library sizes
  local wheel
  wheel=$(ls "$W/host_$1"/flash_attn-*.whl | head -1)
  echo "wheel: $(basename "$wheel") $(stat -c %s "$wheel") bytes"
  python3 -c 'import sys, zipfile
for i in zipfile.ZipFile(sys.argv[1]).infolist():
    if "_C_" in i.filename or "build_info" in i.filename: print(i.file_size, i.filename)' "$wheel"  # no unzip there
  python3 -c 'import time; t = time.perf_counter(); import flash_attn; print(f"import flash_attn: {time.perf_counter() - t:.2f} s (first, cold)")'
  python3 -c 'import time; t = time.perf_counter(); import flash_attn; print(f"import flash_attn: {time.perf_counter() - t:.2f} s (warm)")'
  python3 -m flash_attn
}
release_install() {  # abi wheel: install it into $W/site_<abi> unless that holds it already
  if [ "$(cat "$W/site_$1/.from" 2>/dev/null)" != "$2" ]; then
    rm -rf "$W/site_$1"; python3 -m pip install -q --no-deps --no-index --target "$W/site_$1" "$2" || exit 3
    echo "$2" > "$W/site_$1/.from"
  fi
}
up_start() {  # abi: upstream's tests of that wheel, detached, from a copy of the sources (a later call
  # re-sends the tree), unless they ran or run already
  local abi=$1
  [ -f "$W/up$abi.done" ] || [ -f "$W/up$abi.failed" ] || running "up$abi" || {
    rm -rf "$W/tree_$abi" && mkdir -p "$W/tree_$abi" &&
      cp -r "$ROOT/src" "$ROOT/flash_attn" "$ROOT/cmake" "$ROOT/build-manifest.json" "$ROOT/pyproject.toml" "$W/tree_$abi/" &&
      background "up$abi" "up_$abi" up_tests; }
}
release_up() {  # abi: upstream's tests of that wheel (up_start), waited for; 0 when done
  local abi=$1
  up_start "$abi"
  wait_for "up$abi" "$(left 15)"
  cp "$W/up$abi.log" "$R/upstream_$abi.txt" 2>/dev/null
  cp "$W/once/up_$abi/upstream_tests.json" "$R/upstream_tests_$abi.json" 2>/dev/null
  tail -n 24 "$W/up$abi.log"
  [ -f "$W/up$abi.failed" ] && rc=1
  [ -f "$W/up$abi.done" ] || [ -f "$W/up$abi.failed" ]
}

case "$phase" in
build)
  {
    nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])'
    cmake --version | head -1; nvcc --version | tail -1; ninja --version
  } 2>&1 | tee "$R/machine.txt"
  [ -f "$W/wheel.done" ] || background wheel build_ours_and_wheel build_wheel
  if [ "${WITH_TREE:-0}" = 1 ] && [ ! -f "$W/tree_wheel.done" ]; then background tree_wheel tree_wheel; fi
  wait_for wheel "$(left 20)" || { echo "wheel: not ready (the next phase waits for it)"; tail -20 "$W/wheel.log"; exit 1; }
  grep -E "ninja: no work|^\[[0-9]+/[0-9]+\]" "$W/wheel.log" | tail -5
  cp "$W/bb/build.json" "$W/bb/build.md" "$R/" 2>/dev/null
  return_wheel "$(ls "$W"/dist/flash_attn-*.whl | head -1)"
  ;;
test)
  wheel=${WHEEL:-}
  if [ -z "$wheel" ]; then
    if [ ! -f "$W/wheel.done" ] && ! running wheel; then
      echo "no wheel: run the build phase first (same lease), or carry a wheel and pass WHEEL=path"; exit 2
    fi
    wait_for wheel "$(left 300)" || { echo "wheel: not ready"; tail -20 "$W/wheel.log"; exit 1; }
    build_wheel > "$W/wheel_repack.log" 2>&1 || { echo "repackaging the wheel failed"; tail -20 "$W/wheel_repack.log"; exit 1; }
    wheel=$(ls "$W"/dist/flash_attn-*.whl | head -1)
    [ -f "$OUT/$(basename "$wheel").part00" ] || return_wheel "$wheel"
  fi
  wheel=$(readlink -f "$wheel")
  if [ "${LOAD_COST:-1}" = 1 ]; then start_ci_build ci_none none; start_ci_build ci_size size; fi
  rm -rf "$W/site_dev"; python3 -m pip install -q --no-deps --no-index --target "$W/site_dev" "$wheel" || exit 3
  lib=$(ls "$W"/site_dev/flash_attn/_C_*.so | head -1)
  cd "$W" || exit 3  # never import the checkout's flash_attn/
  # correctness first (the ci builds compile meanwhile; nothing here is timed)
  PYTHONPATH="$SITE" step build_info 300 python3 -m flash_attn
  PYTHONPATH="$SITE" step release_paths 300 python3 "$ROOT/tools/release_paths.py" --dtype all || rc=1
  step rescale_skip_dev 280 python3 "$ROOT/tests/gpu/rescale_skip.py" --lib "$lib" --dims 64,128 || rc=1
  PYTHONPATH="$SITE" step opcheck 200 python3 "$ROOT/tests/gpu/test_opcheck.py" || rc=1
  PYTHONPATH="$SITE" step dropout_fp16 170 python3 "$ROOT/tools/dropout_rng.py" --dtype fp16 || rc=1
  PYTHONPATH="$SITE" step dropout_bf16 150 python3 "$ROOT/tools/dropout_rng.py" --dtype bf16 || rc=1
  if [ "${TIMED:-1}" = 1 ]; then
    [ "${LOAD_COST:-1}" = 1 ] && { wait_for ci_none "$(left 240)"; wait_for ci_size "$(left 240)"; }
    timed_steps "$wheel"
  fi
  if [ "${LOAD_COST:-1}" = 1 ]; then
    if [ -f "$W/ci_none.done" ] && [ -f "$W/ci_size.done" ]; then
      step load_cost 5 python3 "$ROOT/bench/load_cost.py" --build none="$W/ci_none" --build size="$W/ci_size" --out "$R" || rc=1
    else
      echo "load cost: the ci builds failed or have not finished"; tail -n 20 "$W"/ci_*.log; rc=1
    fi
  fi
  # upstream's build of the same units, alone on the machine, collected by the next call
  if [ "${UPSTREAM:-1}" = 1 ] && [ -f "$W/bb/build.json" ] && [ ! -d "$W/up" ]; then
    python3 "$ROOT/bench/build.py" --upstream-background "$W/up" --upstream-mode units --sdist "$SDIST" \
      --archs "$ARCHS" --kernel-set "$KSET" --jobs "$JOBS"
  fi
  exit $rc
  ;;
upstream)
  set -o pipefail
  python3 "$ROOT/bench/build.py" --out "$W/bb" --reuse-ours --collect "$W/up" --wait-s "$(left 30)" 2>&1 | tee "$R/collect.txt" || rc=1
  cp "$W/bb/build.json" "$W/bb/build.md" "$R/" 2>/dev/null
  cp "$W"/up/*.log "$W"/up/*.json "$R/" 2>/dev/null
  head -80 "$R/build.md" 2>/dev/null
  grep -q '"state": "done"' "$W/up/status.json" 2>/dev/null || { echo "upstream build: not done"; rc=1; }
  exit $rc
  ;;
tree)
  [ -f "$W/tree_wheel.done" ] || background tree_wheel tree_wheel
  wait_for tree_wheel "$(left 150)" || {
    if [ -f "$W/tree_wheel.failed" ]; then echo "tree wheel: the build failed (a new call starts it again)"
    else echo "tree wheel: not ready (call the tree phase again; it keeps building)"; fi
    tail -25 "$W/tree_wheel.log"; exit 1
  }
  grep -E "^tree:|upstream shape|kernel deltas|patched|^\[[0-9]+/[0-9]+\]" "$W/tree_wheel.log" | tail -12 | tee "$R/tree_build.txt"
  wheel=$(ls "$W"/tree_dist/flash_attn-*.whl | head -1)
  sha256sum "$wheel" | tee "$R/wheel.sha256"
  rm -rf "$W/site_tree"; python3 -m pip install -q --no-deps --no-index --target "$W/site_tree" "$wheel" || exit 3
  cd "$W" || exit 3  # never import the checkout's flash_attn/
  TREE_SITE="$W/site_tree${PYTHONPATH:+:$PYTHONPATH}"
  PYTHONPATH="$TREE_SITE" step build_info 140 python3 -m flash_attn
  PYTHONPATH="$TREE_SITE" step release_paths 60 python3 "$ROOT/tools/release_paths.py" --dtype all || rc=1
  PYTHONPATH="$TREE_SITE" step dropout_fp16 30 python3 "$ROOT/tools/dropout_rng.py" --dtype fp16 || rc=1
  PYTHONPATH="$TREE_SITE" step dropout_bf16 5 python3 "$ROOT/tools/dropout_rng.py" --dtype bf16 || rc=1
  exit $rc
  ;;
opcheck)
  rm -rf "$W/quick_dist" "$W/site_quick"
  step quick_build 60 python3 -m build --wheel --no-isolation --skip-dependency-check -o "$W/quick_dist" \
    -C build-dir="$W/quick" -C cmake.define.FLASH_ATTN_ARCH_GROUP=custom -C cmake.define.FLASH_ATTN_CUDA_ARCHS="$ARCHS" \
    -C cmake.define.FLASH_ATTN_KERNEL_SET="$KSET" -C cmake.define.FLASH_ATTN_SDIST="$SDIST" \
    -C cmake.define.FLASH_ATTN_JOBS="$JOBS" "$ROOT" || exit 1
  python3 -m pip install -q --no-deps --no-index --target "$W/site_quick" "$W"/quick_dist/flash_attn-*.whl || exit 3
  cd "$W" || exit 3
  QUICK_SITE="$W/site_quick${PYTHONPATH:+:$PYTHONPATH}"
  PYTHONPATH="$QUICK_SITE" step opcheck 30 python3 "$ROOT/tests/gpu/test_opcheck.py" || rc=1
  PYTHONPATH="$QUICK_SITE" step probe_p 5 python3 "$ROOT/lab/probe_dropout_probs.py" || rc=1
  exit $rc
  ;;
bench)
  wheel=$(readlink -f "${WHEEL:-$(ls "$W"/dist/flash_attn-*.whl 2>/dev/null | head -1)}")
  [ -f "$wheel" ] && [ -d "$W/site_dev" ] || { echo "no dev wheel installed: run the test phase first (same lease)"; exit 2; }
  cd "$W" || exit 3
  timed_steps "$wheel"
  exit $rc
  ;;
shards)
  shards_machine
  # release.sessions.wheels builds with `python -m build --no-isolation` and its dependency check (pyproject's
  # build requires: scikit-build-core, cmake, ninja as Python packages) and retags with `wheel`
  build_preflight shards || exit 3
  report() { cp "$W"/bs/build_sharded.md "$W"/bs/build_sharded.json "$W"/bs/*.json "$R/" 2>/dev/null
    cp "$W"/bs/sharded/logs/*.log "$W"/bs/unsharded/logs/*.log "$R/" 2>/dev/null; }
  if [ -n "${SHARDED_JSON:-}" ] && [ ! -f "$W/sharded.done" ]; then  # a later lease: the sharded part's record
    mkdir -p "$W/bs" && cp "$SHARDED_JSON" "$W/bs/sharded.json" && touch "$W/sharded.done" || exit 2
    echo "shards: sharded part taken from $SHARDED_JSON (an earlier lease); its GPU steps are not rerun"
    SHARD_TESTS=0
  fi
  wait_part sharded sharded_build || { report; exit 1; }
  if [ "${SHARD_TESTS:-1}" = 1 ]; then
    wheel=$(ls "$W"/bs/wheel/flash_attn-*.whl | head -1)
    echo "sharded wheel: $wheel"; sha256sum "$wheel" | tee "$R/wheel.sha256"
    if [ ! -f "$W/site_shard/.from" ] || [ "$(cat "$W/site_shard/.from")" != "$wheel" ]; then
      rm -rf "$W/site_shard"; python3 -m pip install -q --no-deps --no-index --target "$W/site_shard" "$wheel" || exit 3
      echo "$wheel" > "$W/site_shard/.from"
    fi
    lib=$(ls "$W"/site_shard/flash_attn/_C_*.so | head -1)
    SHARD_SITE="$W/site_shard${PYTHONPATH:+:$PYTHONPATH}"
    cd "$W" || exit 3  # never import the checkout's flash_attn/
    # the GPU steps on a quiet machine, before the unsharded build starts
    PYTHONPATH="$SHARD_SITE" once shard_build_info 400 python3 -m flash_attn
    PYTHONPATH="$SHARD_SITE" once shard_release_paths 300 python3 "$ROOT/tools/release_paths.py" --dtype all || rc=1
    once shard_rescale_skip 240 python3 "$ROOT/tests/gpu/rescale_skip.py" --lib "$lib" --dims 64,128 || rc=1
    PYTHONPATH="$SHARD_SITE" once shard_opcheck 160 python3 "$ROOT/tests/gpu/test_opcheck.py" || rc=1
    # the torch-free kernels read the Philox state the binding converts: dropout replay, fp16 and bf16
    PYTHONPATH="$SHARD_SITE" once shard_dropout_fp16 120 python3 "$ROOT/tools/dropout_rng.py" --dtype fp16 || rc=1
    PYTHONPATH="$SHARD_SITE" once shard_dropout_bf16 90 python3 "$ROOT/tools/dropout_rng.py" --dtype bf16 || rc=1
    benches=""
    if [ "${SHARD_BENCH:-1}" = 1 ]; then  # SHARD_BENCH=0: the stable phase benchmarks this wheel beside its own
      once shard_bench_latency 20 python3 "$ROOT/bench/latency.py" --out "$W/once/kernels" \
        --build "sharded=$W/site_shard" --host-overhead || rc=1
      cp "$W"/once/kernels/*.md "$W"/once/kernels/*.json "$R/" 2>/dev/null
      benches=shard_bench_latency
    fi
    for s in shard_build_info shard_release_paths shard_rescale_skip shard_opcheck shard_dropout_fp16 shard_dropout_bf16 \
      $benches; do
      [ -f "$W/once/$s.rc" ] || { echo "shards: $s not finished in this call; call the shards phase again"; report; exit 1; }
    done
  fi
  # The device tool copies the working tree again at the start of every call, which can pull a
  # file from under a build that runs on across calls: SHARD_UNSHARDED=0 stops here, so that the
  # next call starts the unsharded build at its beginning, with a whole call to finish in.
  if [ "${SHARD_UNSHARDED:-1}" = 0 ] && [ ! -f "$W/unsharded.done" ]; then
    report; echo "shards: GPU steps done; call again with SHARD_UNSHARDED=1 for the unsharded build"; exit 1
  fi
  # started even with little time left: it builds on, detached, until the next call
  wait_part unsharded unsharded_build || { report; exit 1; }
  python3 "$ROOT/bench/build.py" --out "$W/bs" --sharded "$SHARDS" --only report > "$R/report.txt" 2>&1 || rc=1
  report
  cp "$W/bs/build_sharded.md" "$OUT/" 2>/dev/null
  cat "$W/bs/build_sharded.md"
  if [ "$rc" = 0 ]; then echo "shards: all done"; else echo "shards: all steps ran; some failed (rc $rc)"; fi
  exit $rc
  ;;
unsharded)
  # The unsharded build of the shards phase's set alone (16 jobs, about 7 minutes), for a lease that
  # runs it first: the shards phase then finds it done and writes the report after its sharded part.
  shards_machine
  wait_part unsharded unsharded_build || exit 1
  cp "$W"/bs/unsharded.json "$W"/bs/unsharded/logs/*.log "$R/" 2>/dev/null
  echo "unsharded: done ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_seconds"])' "$W/bs/unsharded.json") s)"
  exit 0
  ;;
stable)
  # Issue 15 on the GPU: the stable-ABI wheel linked from the shards phase's kernels archive (the
  # binding alone compiles), checked like the exact wheel, then both side by side: dropout bit for bit
  # (lab/dropout_identity.py) and the kernel benchmark of both builds in one run. Needs the
  # shards phase's sharded part done in this lease (its archive, its exact wheel in site_shard).
  kernels=$(ls -d "$W"/bs/sharded/gathered/kernels-* 2>/dev/null | head -1)
  exact_wheel=$(ls "$W"/bs/wheel/flash_attn-*.whl 2>/dev/null | head -1)
  [ -n "$kernels" ] && [ -n "$exact_wheel" ] || { echo "stable: run the shards phase first (same lease)"; exit 2; }
  if [ ! -f "$W/site_shard/.from" ] || [ "$(cat "$W/site_shard/.from")" != "$exact_wheel" ]; then
    rm -rf "$W/site_shard"; python3 -m pip install -q --no-deps --no-index --target "$W/site_shard" "$exact_wheel" || exit 3
    echo "$exact_wheel" > "$W/site_shard/.from"
  fi
  once stable_link 300 python3 -m release.sessions.wheels --arch-group custom --cuda-archs "$ARCHS" --kernel-set "$KSET" \
    --sdist "$SDIST" --jobs "$JOBS" --kernels "$kernels" --torch-abi stable --no-smoke \
    --build-root "$W/stable_root" --out "$W/stable_dist" || { echo "stable: link failed"; exit 1; }
  wheel=$(ls "$W"/stable_dist/flash_attn-*.whl | head -1)
  echo "stable wheel: $wheel"; sha256sum "$wheel" | tee "$R/stable_wheel.sha256"
  if [ ! -f "$W/site_stable/.from" ] || [ "$(cat "$W/site_stable/.from")" != "$wheel" ]; then
    rm -rf "$W/site_stable"; python3 -m pip install -q --no-deps --no-index --target "$W/site_stable" "$wheel" || exit 3
    echo "$wheel" > "$W/site_stable/.from"
  fi
  lib=$(ls "$W"/site_stable/flash_attn/_C_*.so | head -1)
  nm -D -C --undefined-only "$lib" | grep -c -E '\b(at|c10)::' > "$R/stable_aten_symbols.txt"  # as the build test
  STABLE_SITE="$W/site_stable${PYTHONPATH:+:$PYTHONPATH}"
  SHARD_SITE_ALL="$W/site_shard${PYTHONPATH:+:$PYTHONPATH}"
  cd "$W" || exit 3
  PYTHONPATH="$STABLE_SITE" once stable_build_info 480 python3 -m flash_attn
  PYTHONPATH="$STABLE_SITE" once stable_release_paths 430 python3 "$ROOT/tools/release_paths.py" --dtype all || rc=1
  once stable_rescale_skip 390 python3 "$ROOT/tests/gpu/rescale_skip.py" --lib "$lib" --dims 64,128 || rc=1
  # dropout of both wheels for the same seeds, bit for bit
  PYTHONPATH="$SHARD_SITE_ALL" once dropout_save_exact 370 python3 "$ROOT/lab/dropout_identity.py" --save "$W/once/exact.pt" || rc=1
  PYTHONPATH="$STABLE_SITE" once dropout_save_stable 350 python3 "$ROOT/lab/dropout_identity.py" --save "$W/once/stable.pt" || rc=1
  once dropout_compare 345 python3 "$ROOT/lab/dropout_identity.py" --compare "$W/once/exact.pt" "$W/once/stable.pt" || rc=1
  PYTHONPATH="$STABLE_SITE" once stable_validate 280 python3 "$ROOT/tools/validate.py" --out "$R" --wheel "$wheel" || rc=1
  once stable_bench_latency 100 python3 "$ROOT/bench/latency.py" --out "$W/once/kernels_abi" --rounds "${BENCH_ROUNDS:-1}" \
    --build "exact=$W/site_shard" --build "stable=$W/site_stable" --host-overhead || rc=1
  PYTHONPATH="$STABLE_SITE" once stable_opcheck 60 python3 "$ROOT/tests/gpu/test_opcheck.py" || rc=1
  PYTHONPATH="$STABLE_SITE" once stable_dropout_fp16 45 python3 "$ROOT/tools/dropout_rng.py" --dtype fp16 || rc=1
  capture="import sys; sys.path.insert(0, '$ROOT/tests/gpu'); import test_dropout_rng as t; t.test_dropout_in_cuda_graph_capture_never_reuses_one_mask(); print('PASSED')"
  PYTHONPATH="$SHARD_SITE_ALL" once capture_exact 35 python3 -c "$capture" || rc=1
  PYTHONPATH="$STABLE_SITE" once capture_stable 25 python3 -c "$capture" || rc=1
  # A stable-ABI wheel built on the CPU box against torch 2.14.1 (carried in .stable_cpu/, kernel set ci,
  # sm_80 SASS + compute_80 PTX): its smoke checks under this machine's torch 2.11 in a venv, and one
  # call on this GPU (the PTX JIT-compiles for sm_90), if the loader lets an sm_80 wheel run here.
  cpu_wheel=$(ls "$ROOT"/.stable_cpu/flash_attn-*.whl 2>/dev/null | head -1)
  if [ -n "$cpu_wheel" ]; then
    if [ ! -x "$W/venv_cpu/bin/python" ]; then
      python3 -m venv --without-pip "$W/venv_cpu" &&
        python3 -m pip install -q --no-index --no-deps --target "$(ls -d "$W"/venv_cpu/lib/python3*/site-packages)" "$cpu_wheel"
    fi
    # torch from this machine's torch environment (itself a venv, so --system-site-packages misses it)
    TORCH_SITE=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
    export PYTHONPATH="$PYTHONPATH:$TORCH_SITE"
    mkdir -p "$W/smk" && cd "$W/smk" || exit 3
    once cpu_wheel_smoke 12 "$W/venv_cpu/bin/python" "$ROOT/src/release/ship/smoke_check.py" \
      --expect-version "$(basename "$cpu_wheel" | cut -d- -f2)" --group custom || rc=1
    once cpu_wheel_gpu_call 2 "$W/venv_cpu/bin/python" -c "
import torch, flash_attn
q = torch.randn(1, 128, 2, 64, device='cuda', dtype=torch.float16)
out = flash_attn.flash_attn_func(q, q, q)
t = q.transpose(1, 2)
ref = torch.nn.functional.scaled_dot_product_attention(t, t, t).transpose(1, 2)
print('torch', torch.__version__, 'max |out - sdpa|', (out - ref).abs().max().item())"
    cd "$W" || exit 3
  fi
  cp "$W"/once/kernels_abi/*.md "$W"/once/kernels_abi/*.json "$R/" 2>/dev/null
  for s in stable_build_info stable_release_paths stable_rescale_skip dropout_save_exact dropout_save_stable \
    dropout_compare stable_validate stable_bench_latency stable_opcheck stable_dropout_fp16 capture_exact \
    capture_stable; do
    [ -f "$W/once/$s.rc" ] || { echo "stable: $s not finished in this call; call the stable phase again"; exit 1; }
  done
  if [ "$rc" = 0 ]; then echo "stable: all done"; else echo "stable: all steps ran; some failed (rc $rc)"; fi
  exit $rc
  ;;
host)
  # Issue 14 on the GPU: the dev set's kernels compiled once (release.sessions.wheels, exact ABI, detached; about
  # 9 minutes), then every call relinks the exact and the stable-ABI wheel from that kernels archive (the
  # binding alone compiles, so a changed binding costs a minute) and runs HOST_STEPS (default: opcheck and
  # host profile of both wheels, then the kernel benchmark of both with the host-overhead table). Steps
  # done by an earlier call of this lease are skipped unless the binding changed (each wheel's sha256
  # names its results: edited test or bench scripts alone do not rerun them); call it until it says
  # "host: all done".
  built_and_linked host || exit 1
  EXACT_SITE="$W/site_exact${PYTHONPATH:+:$PYTHONPATH}"
  STABLE_SITE="$W/site_stable${PYTHONPATH:+:$PYTHONPATH}"
  for s in ${HOST_STEPS:-opcheck profile bench}; do
    case "$s" in
    opcheck)
      PYTHONPATH="$EXACT_SITE" once host_opcheck_exact 420 python3 "$ROOT/tests/gpu/test_opcheck.py" || rc=1
      PYTHONPATH="$STABLE_SITE" once host_opcheck_stable 400 python3 "$ROOT/tests/gpu/test_opcheck.py" || rc=1 ;;
    profile)
      PYTHONPATH="$EXACT_SITE" once host_profile_exact 380 python3 "$ROOT/lab/host_profile.py" || rc=1
      PYTHONPATH="$STABLE_SITE" once host_profile_stable 360 python3 "$ROOT/lab/host_profile.py" || rc=1 ;;
    bench)
      once host_bench_latency 5 python3 "$ROOT/bench/latency.py" --out "$W/once/host_kernels" --rounds "${BENCH_ROUNDS:-3}" \
        --build "exact=$W/site_exact" --build "stable=$W/site_stable" --host-overhead || rc=1
      cp "$W"/once/host_kernels/*.md "$W"/once/host_kernels/*.json "$R/" 2>/dev/null ;;
    *) echo "host: unknown step $s (opcheck, profile, bench)"; exit 2 ;;
    esac
  done
  for s in ${HOST_STEPS:-opcheck profile bench}; do
    for f in $(case "$s" in opcheck) echo host_opcheck_exact host_opcheck_stable;; profile) echo host_profile_exact host_profile_stable;; bench) echo host_bench_latency;; esac); do
      [ -f "$W/once/$f.rc" ] || { echo "host: $f not finished in this call; call the host phase again"; exit 1; }
    done
  done
  if [ "$rc" = 0 ]; then echo "host: all done"; else echo "host: all steps ran; some failed (rc $rc)"; fi
  exit $rc
  ;;
dropin)
  # Issue 24 on the GPU: the dev set's kernels compiled once (as the host phase: detached, about 9
  # minutes), the exact and the stable-ABI wheel linked from them, then on each wheel upstream's own
  # tests/test_flash_attn.py and test_rotary.py from the pinned sdist, unmodified (nox -s upstream_tests'
  # module: UP_SAMPLE cases spread over every test function, seed UP_SEED, UP_JOBS pytest-xdist workers
  # per wheel, one wheel after the other) and transformers' flash_attention_2 path against its
  # sdpa path (tests/gpu). While the kernels compile, the first call runs test_rotary.py against
  # upstream's own Python modules without any wheel of ours (the known-failure evidence of
  # release.ship.upstream_tests_plugin). Call it until it says "dropin: all done".
  HOST_ROOT=$W/host_root
  [ -f "$W/hostbuild.done" ] || background hostbuild host_build
  steps="dropin_transformers_exact dropin_transformers_stable"
  if [ "${OFFICIAL:-1}" = 1 ]; then
    once rotary_official 60 bash -c "$(declare -f rotary_official); rotary_official"
    steps="rotary_official $steps"
  fi
  built_and_linked dropin || exit 1
  mkdir -p "$W/tf" && cp "$ROOT/tests/gpu/test_transformers_fa2.py" "$W/tf/"
  for abi in exact stable; do
    PYTHONPATH="$W/site_$abi${PYTHONPATH:+:$PYTHONPATH}" once "dropin_transformers_$abi" 20 python3 -m pytest -c /dev/null \
      -p no:cacheprovider -q -s --rootdir "$W/tf" "$W/tf/test_transformers_fa2.py" || rc=1
  done
  # One wheel's run at a time: both at once (2 x 8 workers) ran the GPU out of memory (lab evidence
  # h200-2026-12-02-dropin-2). Detached, from a copy of the sources (a later call re-sends the tree).
  for abi in ${UP_ABIS:-exact stable}; do
    up_start "$abi"
    wait_for "up$abi" "$(left 15)"
    cp "$W/up$abi.log" "$R/dropin_upstream_$abi.txt" 2>/dev/null
    cp "$W/once/up_$abi/upstream_tests.json" "$R/upstream_tests_$abi.json" 2>/dev/null
    tail -n 30 "$W/up$abi.log"
    if [ -f "$W/up$abi.failed" ]; then rc=1; elif [ ! -f "$W/up$abi.done" ]; then
      echo "dropin: upstream tests of the $abi wheel still running; call the dropin phase again at once"; exit 1; fi
  done
  for s in $steps; do
    [ -f "$W/once/$s.rc" ] || { echo "dropin: $s not finished in this call; call the dropin phase again"; exit 1; }
  done
  if [ "$rc" = 0 ]; then echo "dropin: all done"; else echo "dropin: all steps ran; some failed (rc $rc)"; fi
  exit $rc
  ;;
release)
  # Issue 38 on the GPU (see the header). Each call goes as far as its time allows and the next call
  # goes on from there: the builds and upstream's tests run detached, finished steps are not rerun.
  KSET=${REL_KSET:-release}
  UP_SAMPLE=${UP_SAMPLE:-1500}
  # upstream's tests: one pytest-xdist worker per 16 GiB of GPU memory, at most 8. Most workers hold
  # under 9 GiB, but the 131072-key kvcache cases reach 25-29 GiB in one worker: 6 workers on an
  # 80 GB H100 ran out of memory (lab/evidence/h100-2026-12-07-release-full, upstream_exact_6workers.txt)
  # and 4 passed; 2 x 8 workers ran an H200 out of memory (lab/evidence/h200-2026-12-02-dropin-2)
  gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
  UP_JOBS=${UP_JOBS:-$(( ${gpu_mib:-81920} / 1024 / 16 > 8 ? 8 : ${gpu_mib:-81920} / 1024 / 16 ))}
  export KSET UP_SAMPLE UP_JOBS
  shards_machine
  build_preflight release || exit 3
  release_wait; status=$?
  release_report
  if [ "$status" = 1 ]; then echo "release: the sharded build failed"; tail -n 30 "$W/sharded.log"; exit 1; fi
  if [ "$status" = 2 ]; then echo "release: still building (call the release phase again at once)"; exit 1; fi
  exact=$(ls "$W"/bs/wheel/flash_attn-*.whl | head -1)
  mkdir -p "$W/host_exact" && cp -p "$exact" "$W/host_exact/" && exact="$W/host_exact/$(basename "$exact")"
  sha256sum "$exact" | tee "$R/wheel_exact.sha256"
  release_install exact "$exact"
  wait_for stablelink "$(left 30)" || {
    if [ -f "$W/stablelink.failed" ]; then echo "release: the stable link failed"; tail -n 30 "$W/stablelink.log"; rc=1
    else echo "release: the stable link is not done (call the release phase again at once)"; exit 1; fi; }
  abis=exact
  stable=$(ls "$W"/host_stable/flash_attn-*.whl 2>/dev/null | head -1)
  if [ -n "$stable" ]; then
    sha256sum "$stable" | tee "$R/wheel_stable.sha256"
    release_install stable "$stable"
    abis="exact stable"
  fi
  # upstream's tests of both wheels at once, detached, each with half the workers, on a GPU of 120 GiB
  # or more; on a smaller one (an 80 GB H100) two runs at once ran upstream's reference of a 131072-key
  # kvcache case out of memory (lab/evidence/h100-2026-12-07-release-partial): one wheel after the other
  together=$(( ${gpu_mib:-0} >= 120 * 1024 ))
  if [ "$together" = 1 ]; then
    UP_JOBS=$(( UP_JOBS / 2 > 0 ? UP_JOBS / 2 : 1 ))
    export UP_JOBS
    for abi in $abis; do up_start "$abi"; done
  fi
  mkdir -p "$W/tf" && cp "$ROOT/tests/gpu/test_transformers_fa2.py" "$W/tf/"
  cd "$W" || exit 3  # never import the checkout's flash_attn/
  for abi in $abis; do
    PYTHONPATH="$W/site_$abi:$PYTHONPATH" once "release_facts_$abi" 30 bash -c "$(declare -f release_facts); release_facts $abi" || rc=1
  done
  for abi in $abis; do  # transformers' test on a quiet GPU when the upstream tests run one after the other
    PYTHONPATH="$W/site_$abi:$PYTHONPATH" once "release_transformers_$abi" 20 python3 -m pytest -c /dev/null \
      -p no:cacheprovider -q -s --rootdir "$W/tf" "$W/tf/test_transformers_fa2.py" || rc=1
  done
  for abi in $abis; do
    release_up "$abi" || { echo "release: upstream tests of the $abi wheel still running; call the release phase again at once"; exit 1; }
  done
  if [ "${BENCH:-0}" = 1 ]; then
    once release_bench_latency 5 python3 "$ROOT/bench/latency.py" --out "$W/once/rel_kernels" --rounds 1 \
      --build "exact=$W/site_exact" --build "stable=$W/site_stable" || rc=1
    cp "$W"/once/rel_kernels/*.md "$W"/once/rel_kernels/*.json "$R/" 2>/dev/null
  fi
  if [ "$rc" = 0 ]; then echo "release: all done"; else echo "release: all steps ran; some failed (rc $rc)"; fi
  exit $rc
  ;;
*) echo "usage: device_session.sh build|test|upstream|tree|bench|opcheck|shards|unsharded|stable|host|dropin|release" >&2; exit 2 ;;
esac
