"""The kernel sources: kernel sets, shard split, unit generator, deltas, torch-free stand-ins.

A package so that the release tooling imports the kernel sets like any module (``from kernels
import kernel_set`` with ``PYTHONPATH=src``, as the sessions run it). Its modules stay scripts
too: CMake runs ``generate_units.py`` from this folder, which imports ``kernel_set`` from beside
it, so in that process the module is named ``kernel_set``; in the release tooling, bench/ and the
tests it is ``kernels.kernel_set``. Everything here uses the standard library and the stdlib-only
``flash_attn_wheel_names`` (which manifest is in use; the not-built message), which CMake puts on the
generator's ``PYTHONPATH``; this file imports nothing.
"""
