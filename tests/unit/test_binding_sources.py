"""Source-level checks of the C++ operator binding (src/binding); no build, no GPU.

- The schemas registered in src/binding/ops.cpp are exactly those of docs/operators.md.
- Every defined operator gets an implementation, and only defined ones do.
- The binding never touches the Python C API / pybind11 (the wheel is abi3) and marks nothing
  for export (the library is built with hidden visibility).
- No upstream copyright notices were copied into the binding.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINDING = ROOT / "src" / "binding"
OPS_CPP = BINDING / "ops.cpp"
OPERATORS_MD = ROOT / "docs" / "operators.md"

_STRING_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def _calls(source: str, method: str) -> list[str]:
    """Argument text of every `m.<method>(...)` call (parentheses balanced)."""
    out = []
    for match in re.finditer(r"\bm\." + method + r"\s*\(", source):
        depth, i = 1, match.end()
        while depth:
            ch = source[i]
            if ch == '"':  # skip string literals, which may hold parentheses
                i = source.index('"', i + 1)
                while source[i - 1] == "\\":
                    i = source.index('"', i + 1)
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            i += 1
        out.append(source[match.end() : i - 1])
    return out


def registered_schemas() -> dict[str, str]:
    """name -> schema of every m.def in ops.cpp (adjacent string literals joined)."""
    source = _strip_comments(OPS_CPP.read_text())
    schemas = {}
    for args in _calls(source, "def"):
        schema = "".join(_STRING_LITERAL.findall(args))
        name = schema.split("(", 1)[0].strip()
        assert name not in schemas, f"operator {name} defined twice in ops.cpp"
        schemas[name] = schema
    return schemas


def implemented_names() -> set[str]:
    source = _strip_comments(OPS_CPP.read_text())
    names = set()
    for args in _calls(source, "impl"):
        literals = _STRING_LITERAL.findall(args)
        assert literals, f"m.impl without an operator name: {args!r}"
        names.add(literals[0])
    return names


def documented_schemas() -> dict[str, str]:
    """name -> schema from the operator table of docs/operators.md."""
    schemas = {}
    for line in OPERATORS_MD.read_text().splitlines():
        match = re.match(r"\|\s*`(\w+)`\s*\|\s*`([^`]*)`", line)
        if match:
            schemas[match.group(1)] = match.group(2)
    return schemas


def test_docs_table_is_parsed():
    assert set(documented_schemas()) == {
        "fwd",
        "varlen_fwd",
        "bwd",
        "varlen_bwd",
        "fwd_kvcache",
        "build_info",
    }


def test_registered_schemas_match_docs():
    documented = documented_schemas()
    registered = registered_schemas()
    assert set(registered) == set(documented)
    for name, schema in documented.items():
        assert registered[name] == schema, (
            f"schema of {name} differs:\n  ops.cpp: {registered[name]}\n  docs:    {schema}"
        )


def test_every_operator_is_implemented():
    assert implemented_names() == set(documented_schemas())


def test_library_and_impl_blocks():
    source = _strip_comments(OPS_CPP.read_text())
    assert re.search(r"\bTORCH_LIBRARY\s*\(\s*flash_attn\s*,", source)
    assert re.search(r"\bTORCH_LIBRARY_IMPL\s*\(\s*flash_attn\s*,\s*CUDA\s*,", source)
    assert '#include "flash_attn_build_info.h"' in OPS_CPP.read_text()
    assert "kFlashAttnBuildInfoJson" in source


def _binding_sources() -> list[Path]:
    files = sorted(p for p in BINDING.rglob("*") if p.suffix in {".h", ".hpp", ".cpp", ".cu", ".cuh"})
    assert files, "no sources under src/binding"
    return files


def test_no_python_c_api_or_pybind11():
    forbidden = re.compile(
        r"#\s*include\s*[<\"](Python\.h|pybind11/|torch/extension\.h|torch/python\.h)"
        r"|\bPYBIND11_MODULE\b|\bPy[A-Z][A-Za-z]+_[A-Za-z]+\s*\("
    )
    for path in _binding_sources():
        hits = forbidden.findall(path.read_text())
        assert not hits, f"{path.relative_to(ROOT)} uses the Python C API / pybind11: {hits}"


def test_nothing_marked_for_export():
    forbidden = re.compile(
        r"__declspec\s*\(\s*dllexport\s*\)|visibility\s*\(\s*\"default\"\s*\)"
        r"|\bC10_EXPORT\b|\bTORCH_API\b|\bC10_API\b"
    )
    for path in _binding_sources():
        text = _strip_comments(path.read_text())
        assert not forbidden.search(text), f"{path.relative_to(ROOT)} marks a symbol for export"


def test_no_upstream_copyright_lines():
    for path in _binding_sources():
        text = path.read_text()
        assert not re.search(r"Copyright|Tri Dao", text), f"{path.relative_to(ROOT)} carries an upstream copyright line"


def test_forwards_zero_the_padding_of_the_returned_probabilities():
    """P (return_softmax) is (B, H, Sq_r, Sk_r); the kernels store whole 128-row tiles, so the rows
    and columns past each sequence hold values that change from call to call unless the binding
    zeroes them (torch.library.opcheck's eager-vs-traced comparison failed on an H200 without it)."""
    source = _strip_comments((BINDING / "fwd.cpp").read_text(encoding="utf-8"))
    dense, varlen = source.split("> varlen_fwd(", 1)
    dense = dense.split("> fwd(", 1)[1]
    assert "p.narrow(2, dims.seqlen_q" in dense and "p.narrow(3, dims.seqlen_k" in dense
    assert "clear_probability_padding(p, len_q, len_k)" in varlen
