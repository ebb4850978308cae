set -x
cd /work/main
export PATH=/work/main/.nox/tests/bin:$PATH PYTHONPATH=src PIP_CONFIG_FILE=/dev/null
python -m release.kernels build --arch-group custom --cuda-archs 80 --kernel-set ci --out /tmp/ev_cpu/karch --build-root /tmp/ev_cpu/br > /tmp/ev_cpu/kernels.log 2>&1 || exit 1
A=$(ls -d /tmp/ev_cpu/karch/kernels-*)
python -m release.wheels --arch-group custom --cuda-archs 80 --kernel-set ci --kernels $A --torch-abi stable --no-smoke --out /tmp/ev_cpu/wh --build-root /tmp/ev_cpu/br > /tmp/ev_cpu/link.log 2>&1 || exit 2
W=$(ls /tmp/ev_cpu/wh/*.whl)
python -m release.smoke --no-deps $W > /tmp/ev_cpu/smoke-torch2.14.1.log 2>&1; echo "smoke 2.14.1 rc=$?"
python -m release.smoke --torch 2.15.0 $W > /tmp/ev_cpu/smoke-torch2.15.0.log 2>&1; echo "smoke 2.15.0 rc=$?"
so=/tmp/ev_cpu/so; mkdir -p $so; cd $so && unzip -o -q $W 'flash_attn/_C_custom.so' && nm -D -C --undefined-only flash_attn/_C_custom.so | grep -c -E '\b(at|c10)::' > /tmp/ev_cpu/aten_refs.txt
