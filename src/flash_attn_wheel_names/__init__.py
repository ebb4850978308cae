"""How this project's wheels are named and where they are served: the one definition of each.

- :mod:`flash_attn_wheel_names.label`: the local version label (``cu130torch2.14.1cxx11abitrue.legacy.rev1``)
  and this project's revision of the upstream release;
- :mod:`flash_attn_wheel_names.install`: which package index serves the wheel for a GPU and torch;
- :mod:`flash_attn_wheel_names.native`: the native library's and build info's file names, and the
  message of a kernel the kernel set left out (rendered into the generated C++);
- :mod:`flash_attn_wheel_names.manifest_file`: which build manifest a source checkout uses.

A top-level package of its own, shipped in every wheel beside ``flash_attn`` (pyproject.toml
``wheel.packages``), because two sides need the same spelling: the installed ``flash_attn`` runtime
(to name the wheel to install when this one cannot run) and the release tooling in ``src/release``
(to tag and index the wheels it builds). The tooling cannot import these rules from ``flash_attn``:
importing that package loads the native library, and in a smoke or validate session it would find
the installed wheel's copy. Standard library only; importing it has no side effects.
"""
