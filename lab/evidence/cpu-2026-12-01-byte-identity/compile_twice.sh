#!/bin/bash
# compile_twice.sh NAME SRC [extra nvcc flags...]: compile SRC twice with the kernels' nvcc flags
# (keep-dirs ka/ and kb/ in the current folder) and print both sha256 prefixes and module ids.
name=$1; src=$2; shift 2; base=$(basename "$src" .cu)
FL=(-O3 -DNDEBUG -std=c++17 "--generate-code=arch=compute_80,code=[sm_80]" "--generate-code=arch=compute_80,code=[compute_80]"
    -Xcompiler=-fPIC -Xcompiler=-fvisibility=hidden --use_fast_math --expt-relaxed-constexpr --expt-extended-lambda
    --compress-mode=size --threads=2)
for r in a b; do rm -rf k$r; mkdir k$r; nvcc -c "${FL[@]}" "$@" --keep --keep-dir k$r "$src" -o $r.o || exit 1; done
s1=$(sha256sum a.o | cut -c1-12); s2=$(sha256sum b.o | cut -c1-12)
printf "%-44s %s %s %s | %s %s\n" "$name" "$s1" "$s2" "$([ "$s1" = "$s2" ] && echo SAME || echo DIFF)" \
  "$(cat ka/$base.module_id)" "$(cat kb/$base.module_id)"
