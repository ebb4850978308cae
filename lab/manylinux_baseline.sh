#!/usr/bin/env bash
# Build the `ci` wheel against an old glibc and run the manylinux_2_28 gate on it, without the
# container image: the stand-in for ci.yml's wheel-ci job on a machine that reaches only the
# package registries (lab/evidence/cpu-2026-12-01-manylinux/README.md has a run's output).
#
#   bash lab/manylinux_baseline.sh [--toolchain-only] [WORKDIR]   (default build/manylinux-baseline)
#
# --toolchain-only stops after step 3: WORKDIR/toolchain/bin/{gcc,g++} are then ready for
# CC=... CXX=... CUDAHOSTCXX=... of any build.
#
# Steps (each prints a "== " heading):
#  1. sysroot: the glibc 2.17 sysroot (headers 2.17, Linux headers 3.10.108, libc/libm/libpthread
#     link libraries) of the npm package @napi-rs/cross-toolchain-x64-target-x86_64@1.0.0, a
#     crosstool-ng toolchain; its gcc 4.8.5 and gcc runtime libraries are dropped. glibc 2.17 is older
#     than manylinux_2_28's 2.28, so every symbol version it can bind is allowed there. (The 2.28
#     packages of Debian buster and AlmaLinux 8 are not on a reachable registry.)
#  2. toolchain: gcc/g++ wrappers around this machine's g++ ($HOST_CXX, default g++-12) that compile
#     against that sysroot and link libc from it (libstdc++ and libgcc_s stay g++'s, as with
#     gcc-toolset), plus a copy of g++'s bits/c++config.h with the answers libstdc++'s configure would
#     give on that glibc: features it lacks are switched off, each by a compile test (step 3).
#  3. probe: a small C++ file using threads, once_flag, shared_ptr and exp links; its symbol
#     versions (objdump -T) must stay within manylinux_2_28 (GLIBC <= 2.28, GLIBCXX <= 3.4.24,
#     CXXABI <= 1.3.11: auditwheel's policy for manylinux_2_28).
#  4. build: nox -s wheel_custom -- --cuda-archs 80 --kernel-set ci with CC, CXX and CUDAHOSTCXX set
#     to the wrappers (a real nvcc build of one unit: minutes); the session's smoke test runs.
#  5. gate: nox -s manylinux (auditwheel show, re-tag to manylinux_2_28_x86_64), then auditwheel show.
#  6. import: a new venv, an empty environment (env -i), an empty folder: import flash_attn, the
#     torch.ops.flash_attn operators, python -m flash_attn.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLCHAIN_ONLY=0
if [ "${1:-}" = --toolchain-only ]; then TOOLCHAIN_ONLY=1; shift; fi
WORK=${1:-$ROOT/build/manylinux-baseline}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
HOST_CXX=${HOST_CXX:-g++-12}
HOST_CC=${HOST_CC:-${HOST_CXX/g++/gcc}}
PKG=@napi-rs/cross-toolchain-x64-target-x86_64
PKG_VERSION=1.0.0
PKG_TGZ=napi-rs-cross-toolchain-x64-target-x86_64-$PKG_VERSION.tgz
PKG_SHA256=351f6ee9bc8e444dfb8ac6eddfe9daed02c9508399bd20c511e3f9e027d6e988
INNER_SHA256=0f5a5b44b6a02bdca6fa71a2bdf67cafb0c1b35c2bcbe3b29ff15ff2e8f9fad5
SR=$WORK/sysroot
TC=$WORK/toolchain

die() { echo "error: $*" >&2; exit 2; }
for tool in npm "$HOST_CXX" "$HOST_CC" nox objdump sha256sum xz; do
  command -v "$tool" >/dev/null || die "$tool not found (npm: apt-get install npm; g++-12: apt-get install g++-12; nox: python3 -m pip install \"\$(PYTHONPATH=src python3 -m release.pins nox)\", the pin of build-manifest.json)"
done

echo "== 1. sysroot ($PKG@$PKG_VERSION)"
if [ ! -f "$SR/.done" ]; then
  [ -f "$WORK/$PKG_TGZ" ] || npm pack --silent "$PKG@$PKG_VERSION" --pack-destination "$WORK" >/dev/null
  echo "$PKG_SHA256  $WORK/$PKG_TGZ" | sha256sum -c --quiet - || die "$PKG_TGZ is not the pinned file; delete it and rerun"
  rm -rf "$WORK/pkg" "$SR" && mkdir -p "$WORK/pkg"
  tar -xzf "$WORK/$PKG_TGZ" -C "$WORK/pkg"
  echo "$INNER_SHA256  $WORK/pkg/package/x86_64-unknown-linux-gnu.tar.xz" | sha256sum -c --quiet -
  mkdir -p "$WORK/pkg/tc"
  tar -xJf "$WORK/pkg/package/x86_64-unknown-linux-gnu.tar.xz" -C "$WORK/pkg/tc" ./x86_64-unknown-linux-gnu/sysroot
  mv "$WORK/pkg/tc/x86_64-unknown-linux-gnu/sysroot" "$SR" && rm -rf "$WORK/pkg"
  # gcc 4.8.5's runtime: libstdc++ and libgcc_s must come from the compiler that builds (g++ 12).
  rm -f "$SR"/{lib,lib64}/lib{stdc++,supc++,gcc_s,atomic,itm}*
  touch "$SR/.done"
fi
grep -h 'define[[:space:]]*__GLIBC_MINOR__' "$SR/usr/include/features.h"

echo "== 2. toolchain ($HOST_CXX against $SR)"
# Made in toolchain.new and kept only when it differs: an unchanged rerun leaves the header's
# time stamp alone, so the build below stays incremental.
NEW=$TC.new
rm -rf "$NEW" && mkdir -p "$NEW/bin" "$NEW/cxxconfig/bits"
for pair in "gcc:$HOST_CC" "g++:$HOST_CXX"; do
  # -isystem: the edited bits/c++config.h shadows g++'s; -L: libc, libm and libpthread from the
  # sysroot come before g++'s own search path (which holds this machine's libc).
  cat >"$NEW/bin/${pair%%:*}" <<EOF
#!/bin/sh
exec $(command -v "${pair#*:}") --sysroot=$SR -isystem $NEW/cxxconfig -B$SR/usr/lib64 "\$@" -L$SR/usr/lib64 -L$SR/lib64
EOF
  chmod +x "$NEW/bin/${pair%%:*}"
done
HOST_CONFIG=$(echo "#include <bits/c++config.h>" | "$HOST_CXX" -x c++ -M - | grep -o '[^ ]*/bits/c++config\.h')
CONFIG=$NEW/cxxconfig/bits/c++config.h
cp "$HOST_CONFIG" "$CONFIG"
compiles() { printf '%b\n' "$1" | "$NEW/bin/g++" -std=c++20 -x c++ -fsyntax-only "${@:2}" - 2>/dev/null; }
# macro  <->  the declaration libstdc++'s configure looks for (glibc 2.30 / 2.36 features)
while read -r macro probe; do
  if ! compiles "$probe"; then
    sed -i -E "s@^#define $macro 1\$@/* #undef $macro: not in the sysroot's glibc */@" "$CONFIG"
    echo "off: $macro"
  fi
done <<'EOF'
_GLIBCXX_USE_PTHREAD_COND_CLOCKWAIT #include <pthread.h>\nauto p = &pthread_cond_clockwait;
_GLIBCXX_USE_PTHREAD_MUTEX_CLOCKLOCK #include <pthread.h>\nauto p = &pthread_mutex_clocklock;
_GLIBCXX_USE_PTHREAD_RWLOCK_CLOCKLOCK #include <pthread.h>\nauto p = &pthread_rwlock_clockrdlock;
_GLIBCXX_HAVE_ARC4RANDOM #include <stdlib.h>\nauto p = &arc4random;
_GLIBCXX_USE_UCHAR_C8RTOMB_MBRTOC8_CXX20 #include <uchar.h>\nauto p = &c8rtomb;
_GLIBCXX_USE_UCHAR_C8RTOMB_MBRTOC8_FCHAR8_T #include <uchar.h>\nauto p = &c8rtomb;
EOF
# glibc < 2.23 declares int isinf(double) / isnan(double) in <math.h> for C++11 too; <cmath> must
# then reuse them (-nostdinc++: the C library's math.h, not libstdc++'s wrapper, as in configure).
for fn in isinf isnan; do
  if compiles "#include <math.h>\n#undef $fn\nint (*p)(double) = &::$fn;" -nostdinc++; then
    macro=_GLIBCXX_HAVE_OBSOLETE_${fn^^}
    sed -i "s@^#endif // _GLIBCXX_CXX_CONFIG_H@#define $macro 1 /* the sysroot's <math.h> declares $fn(double) */\n&@" "$CONFIG"
    echo "on:  $macro"
  fi
done
# The wrappers name $NEW; rewrite them to $TC before comparing.
sed -i "s@$NEW@$TC@g" "$NEW/bin/gcc" "$NEW/bin/g++"
if diff -r -q "$NEW" "$TC" >/dev/null 2>&1; then rm -rf "$NEW"; else rm -rf "$TC" && mv "$NEW" "$TC"; fi

echo "== 3. probe"
cat >"$WORK/probe.cpp" <<'EOF'
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
static std::once_flag once;
extern "C" double probe(int n) {
  std::call_once(once, [] {});
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) pool.emplace_back([] {});
  for (auto& t : pool) t.join();
  auto s = std::make_shared<std::string>(std::to_string(n));
  return std::exp(static_cast<double>(s->size()));
}
EOF
"$TC/bin/g++" -std=c++20 -O2 -fPIC -shared -pthread -Wl,--no-undefined "$WORK/probe.cpp" -o "$WORK/probe.so"
versions=$(objdump -T "$WORK/probe.so" | grep -oE '\b(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -Vu | tr '\n' ' ')
echo "probe.so needs: $versions"
python3 - "$versions" <<'EOF'
import sys
limit = {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 24), "CXXABI": (1, 3, 11)}  # auditwheel 6.8.2, manylinux_2_28
bad = [v for v in sys.argv[1].split() if tuple(map(int, v.split("_")[1].split("."))) > limit[v.split("_")[0]]]
sys.exit(f"newer than manylinux_2_28: {bad}" if bad else 0)
EOF

[ "$TOOLCHAIN_ONLY" = 1 ] && { echo "== toolchain ready: CC=$TC/bin/gcc CXX=$TC/bin/g++ CUDAHOSTCXX=$TC/bin/g++"; exit 0; }

echo "== 4. build (nox -s wheel_custom -- --cuda-archs 80 --kernel-set ci)"
OUT=$WORK/wheelhouse
rm -rf "$OUT"
cd "$ROOT"
CC=$TC/bin/gcc CXX=$TC/bin/g++ CUDAHOSTCXX=$TC/bin/g++ \
  nox -s wheel_custom -- --cuda-archs 80 --kernel-set ci --out "$OUT" --build-root "$WORK/build"

echo "== 5. gate (nox -s manylinux) and auditwheel show"
nox -s manylinux -- "$OUT" --policy manylinux_2_28
WHEEL=$(ls "$OUT"/flash_attn-*-manylinux_2_28_x86_64.whl)
"$ROOT/.nox/manylinux/bin/auditwheel" show "$WHEEL"
(cd "$OUT" && sha256sum -c "$(basename "$WHEEL").sha256")

echo "== 6. import in a new venv, empty environment, empty folder"
rm -rf "$WORK/venv" "$WORK/empty" && mkdir "$WORK/empty"
# --system-site-packages: the machine's torch 2.14.1 (the one the wheel was built against), not the checkout.
python3 -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --no-deps "$WHEEL"
cd "$WORK/empty"
env -i HOME="$HOME" PATH=/usr/bin:/bin "$WORK/venv/bin/python" -c '
import json, os, sys, torch, flash_attn
state = flash_attn._loader.STATE
print("flash_attn", flash_attn.__version__, "from", os.path.dirname(flash_attn.__file__))
print("torch", torch.__version__, "| python", sys.version.split()[0], "| library loaded:", state.ready, state.library)
ops = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("flash_attn::"))
print("operators:", ", ".join(ops))
info = json.loads(torch.ops.flash_attn.build_info())  # runs C++ of the library: JSON from its build info
print("torch.ops.flash_attn.build_info(): archs", info["archs"], "kernel set", info["kernel_set"])
q = torch.zeros(1, 8, 1, 64, dtype=torch.float16)
try:
    torch.ops.flash_attn.fwd(q, q, q, None, 0.0, 0.125, False, -1, -1, 0.0, False, None)
    sys.exit("fwd on CPU tensors returned instead of raising")
except RuntimeError as e:  # the operator input checks in C++ (TORCH_CHECK), on CPU
    print("torch.ops.flash_attn.fwd on CPU tensors raises:", str(e).splitlines()[0])
assert state.ready and "flash_attn::fwd" in ops and info["archs"] == [80]
'
env -i HOME="$HOME" PATH=/usr/bin:/bin "$WORK/venv/bin/python" -m flash_attn
echo "== done: $WHEEL"
