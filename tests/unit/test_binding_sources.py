"""Source-level checks of the C++ operator binding (src/binding); no build, no GPU.

- The schemas (src/binding/schemas.h, defined by its define_operators) are exactly those of
  docs/operators.md, and both registrations (ops.cpp on ATen, ops_stable.cpp on the stable ABI) call
  define_operators and implement every operator.
- The sources of the stable-ABI build include no ATen, c10 library or torch/library.h header.
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
OPS_STABLE_CPP = BINDING / "ops_stable.cpp"
SCHEMAS_H = BINDING / "schemas.h"
REGISTRATIONS = (OPS_CPP, OPS_STABLE_CPP)
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


def schema_constants() -> dict[str, str]:
    """constant name -> schema of every `inline constexpr const char* kX = "...";` in schemas.h."""
    source = _strip_comments(SCHEMAS_H.read_text())
    out = {}
    for match in re.finditer(r"constexpr\s+const\s+char\s*\*\s*(\w+)\s*=([^;]*);", source):
        out[match.group(1)] = "".join(_STRING_LITERAL.findall(match.group(2)))
    return out


def registered_schemas() -> dict[str, str]:
    """name -> schema of every m.def in schemas.h's define_operators (its argument names a constant)."""
    constants = schema_constants()
    source = _strip_comments(SCHEMAS_H.read_text())
    schemas = {}
    for args in _calls(source, "def"):
        constant = args.strip().split("::")[-1]
        assert constant in constants, f"schemas.h: m.def({args.strip()}) is not a schemas.h constant"
        schema = constants[constant]
        name = schema.split("(", 1)[0].strip()
        assert name not in schemas, f"operator {name} defined twice in schemas.h"
        schemas[name] = schema
    return schemas


def implemented_names(path: Path = OPS_CPP) -> set[str]:
    source = _strip_comments(path.read_text())
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
            f"schema of {name} differs:\n  schemas.h: {registered[name]}\n  docs:    {schema}"
        )


def test_both_registrations_define_every_operator_of_schemas_h():
    for path, library in ((OPS_CPP, "TORCH_LIBRARY"), (OPS_STABLE_CPP, "STABLE_TORCH_LIBRARY")):
        source = _strip_comments(path.read_text())
        block = re.search(r"\b" + library + r"\s*\(\s*flash_attn\s*,\s*m\s*\)\s*\{([^}]*)\}", source)
        assert block and "define_operators(m)" in block.group(1), f"{path.name} does not define the operators"


def test_every_operator_is_implemented():
    for path in REGISTRATIONS:
        assert implemented_names(path) == set(documented_schemas()), path.name


def test_stable_registration_uses_the_stable_library():
    source = _strip_comments(OPS_STABLE_CPP.read_text())
    assert re.search(r"\bSTABLE_TORCH_LIBRARY\s*\(\s*flash_attn\s*,", source)
    assert re.search(r"\bSTABLE_TORCH_LIBRARY_IMPL\s*\(\s*flash_attn\s*,\s*CUDA\s*,", source)
    assert "TORCH_LIBRARY(" not in source.replace("STABLE_TORCH_LIBRARY(", "")


# Sources only the exact (ATen) build compiles; every other source is compiled by both builds.
EXACT_ONLY = {"ops.cpp", "torch_free_bridge.cpp", "torch_free_bridge.h", "tensor_api_aten.h"}
_INCLUDE = re.compile(r'#\s*include\s*[<"]([^>"]+)[>"]')
_ATEN_HEADER = re.compile(r"^(ATen/|c10/|torch/library\.h|torch/extension\.h|torch/all\.h|torch/torch\.h)")


def stable_build_includes() -> dict[str, list[str]]:
    """file -> the torch headers it includes, for every src/binding file the stable build compiles
    (tensor_api.h includes tensor_api_aten.h only without FLASH_ATTN_STABLE_ABI, so it is skipped)."""
    out = {}
    for path in _binding_sources():
        if path.name in EXACT_ONLY:
            continue
        out[path.name] = [h for h in _INCLUDE.findall(path.read_text()) if h != "tensor_api_aten.h"]
    return out


def test_stable_build_includes_no_aten():
    for name, headers in stable_build_includes().items():
        bad = [h for h in headers if _ATEN_HEADER.match(h)]
        assert not bad, f"{name} is compiled by the stable-ABI build but includes {bad}"


def test_the_stable_check_would_catch_an_aten_include():
    """The check above is not vacuous: the exact-only files do include ATen."""
    aten = [h for h in _INCLUDE.findall((BINDING / "tensor_api_aten.h").read_text()) if _ATEN_HEADER.match(h)]
    assert aten, "tensor_api_aten.h includes no ATen header: the stable-ABI check proves nothing"
    assert "tensor_api_stable.h" in stable_build_includes()


def test_exact_registration_uses_torch_library():
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
    assert "narrowed(p, 2, dims.seqlen_q" in dense and "narrowed(p, 3, dims.seqlen_k" in dense
    assert "clear_probability_padding(p, len_q, len_k)" in varlen
