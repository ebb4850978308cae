#!/bin/bash
# Two real compiles of one instantiation unit (shard 2/2 of the two-unit set: fwd_hdim64_fp16_causal,
# sm_80), no compile cache, in two build roots at different paths; run from the repository root with
# the pinned cmake and ninja on PATH. Compare: sha256sum /tmp/byteid13/out-root*/kernels-*/objects/*.o
for r in rootA rootB/deeper; do
  echo "== $r $(date -u +%T)"
  PYTHONPATH=src python3 -m release.kernels build --arch-group custom --cuda-archs 80 \
    --kernel-set fwd_hdim64_fp16,fwd_hdim64_fp16_causal --shard 2/2 --cache none \
    --build-root /tmp/byteid13/$r --out /tmp/byteid13/out-${r%%/*} || exit 1
done
echo "== done $(date -u +%T)"
