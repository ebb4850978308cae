"""src/kernels/torch_free_tree.py: the staged flash.h declares philox_args with the kernels' own type.

On the pinned tree (the session's upstream_tree fixture, copied before it is changed), then on the
rewritten text again (idempotent), a main-style flash.h (left alone) and a flash.h whose type comes
from elsewhere (refused, naming the file).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import torch_free_tree  # src/kernels/ is on pytest's pythonpath

SCRIPT = Path(torch_free_tree.__file__)


def _copy_flash_h(upstream_tree: Path, tmp_path: Path) -> Path:
    src = upstream_tree / "csrc" / "flash_attn" / "src" / "flash.h"
    dest = tmp_path / "tree" / "csrc" / "flash_attn" / "src" / "flash.h"
    dest.parent.mkdir(parents=True)
    shutil.copyfile(src, dest)
    return dest


def _run(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--tree", str(tree)], capture_output=True, text=True)


def test_the_pinned_flash_h_gets_the_kernels_philox_state_and_no_aten_include(upstream_tree, tmp_path):
    flash_h = _copy_flash_h(upstream_tree, tmp_path)
    assert "at::PhiloxCudaState philox_args;" in flash_h.read_text()
    first = _run(tmp_path / "tree")
    assert first.returncode == 0 and "PhiloxState" in first.stdout, first.stderr
    text = flash_h.read_text()
    assert "::flash_attn_wheels::PhiloxState philox_args;" in text and '#include "torch_free/torch_free.h"' in text
    assert "ATen" not in text.split("struct Flash_fwd_params")[0].replace("flash_attn", "")  # no torch include left
    again = _run(tmp_path / "tree")
    assert again.returncode == 0 and "nothing to rewrite" in again.stdout and flash_h.read_text() == text


def test_a_main_style_flash_h_is_left_alone_and_an_unknown_origin_is_refused(tmp_path):
    main_style = "struct Flash_fwd_params {\n    uint64_t philox_args[4];\n};\n"
    assert torch_free_tree.rewrite(main_style) == (main_style, False)
    flash_h = tmp_path / "tree" / "csrc" / "flash_attn" / "src" / "flash.h"
    flash_h.parent.mkdir(parents=True)
    flash_h.write_text('#include "somewhere_else.h"\nstruct P {\n    at::PhiloxCudaState philox_args;\n};\n')
    proc = _run(tmp_path / "tree")
    assert proc.returncode == 2 and str(flash_h) in proc.stderr and "torch_free_tree.py" in proc.stderr
