"""Building one wheel or a dev install on this machine.

From the options (:mod:`~release.build.options`, :mod:`~release.build.arch_rules`) and the
toolchain probe (:mod:`~release.build.toolchain`), through the one prepare step
(:mod:`~release.build.prepare`), to the build folder (:mod:`~release.build.build_dirs`), the Ninja
run with its progress, prediction and compile cache, and the ``wheel_*`` and ``dev`` sessions
themselves (:mod:`~release.build.wheels`, :mod:`~release.build.dev`). The kernel objects' archives
are :mod:`release.archive`; what happens to a built wheel is :mod:`release.ship`.
"""
