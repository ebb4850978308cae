"""The arguments a Windows step's ``shell: pwsh`` script passes to this project's entry points.

The rehearsal runs no Windows job, but a pwsh line that hands an entry point the wrong argument
vector (``nox -s $env:SESSION -- $env:SESSION_ARGS`` passes all of SESSION_ARGS as ONE argument)
fails every Windows leg on GitHub. This module tokenises the subset of PowerShell the workflows
use, the way PowerShell 7 passes arguments to a native command (about_Parsing, "Argument mode";
about_Splatting; about_Split), and hands the result to the entry point's own argparse parser:

- statements split at newlines and ``;``; a backtick at the end of a line continues it; ``#`` to
  the end of a line is a comment; a ``|`` ends what is passed to the native command;
- ``'text'`` is literal (``''`` is one quote); ``"text"`` expands ``$env:NAME``, ``$name``,
  ``${name}`` and backtick escapes; a bare word expands the same variables and stays ONE argument
  whatever its value holds (spaces included), unless the bare word is exactly a variable holding an
  array, which passes one argument per element, as ``@name`` (splatting) does;
- assignments ``$name = <value>`` for the forms used: a quoted string, ``$true``/``$false``,
  ``$env:NAME -split 'pattern'`` (a regular expression, as PowerShell's -split), ``@(a, b)``;
  ``$env:NAME = value`` sets the environment.

Unknown constructs in a line that calls an entry point raise :class:`PwshError`, so a new form is
noticed, not guessed. Entry points: ``nox [-s SESSION] -- ARGS`` (noxfile.py's sessions: the
``archive_<group>``, ``wheel_<group>`` and ``archive_gather`` sessions call release.archive.archives
and release.sessions.wheels with the arguments ``_release`` adds) and ``python -m release.<module>
ARGS`` for a module that has ``parser()``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re

from release.errors import ReleaseError


class PwshError(ReleaseError, ValueError):
    """A PowerShell construct this module does not model, in a line that calls an entry point."""


_VAR = re.compile(r"\$(?:env:([A-Za-z_][A-Za-z0-9_]*)|\{([^}]+)\}|([A-Za-z_][A-Za-z0-9_]*))")
_ESCAPES = {"n": "\n", "t": "\t", "`": "`", '"': '"', "$": "$", "0": "\0"}


def statements(script: str) -> list[str]:
    """The script's statements: continuations joined, comments dropped, split at newlines and ``;``."""
    joined = re.sub(r"`\r?\n", " ", script)
    out = []
    for line in joined.splitlines():
        line = _strip_comment(line).strip()
        out += [s.strip() for s in _split_outside_quotes(line, ";") if s.strip()]
    return out


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    parts, cur, quote = [], [], ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == sep:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


class Shell:
    """The variables of one pwsh script run: `env` ($env:NAME) and the script's own ($name)."""

    def __init__(self, env: dict[str, str]):
        self.env = dict(env)
        self.vars: dict[str, object] = {"true": True, "false": False, "null": None}

    def _value(self, m: re.Match):
        if m.group(1):
            return self.env.get(m.group(1), "")
        name = m.group(2) or m.group(3)
        return self.vars.get(name.lower(), "")

    def _expand(self, text: str) -> str:
        return _VAR.sub(lambda m: _text(self._value(m)), text)

    def words(self, line: str) -> list[str]:
        """The arguments PowerShell passes for one command line in argument mode (module docstring)."""
        line = _split_outside_quotes(line, "|")[0]
        out: list[str] = []
        i, n = 0, len(line)
        while i < n:
            if line[i].isspace():
                i += 1
                continue
            if line[i] == "@" and i + 1 < n and (line[i + 1].isalpha() or line[i + 1] == "_"):
                m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(line, i + 1)
                value = self.vars.get(m.group(0).lower(), [])
                out += [_text(v) for v in (value if isinstance(value, list) else [value])]
                i = m.end()
                continue
            word, parts, i = "", [], i
            whole_var = _VAR.match(line, i)
            if whole_var and (whole_var.end() == n or line[whole_var.end()].isspace()):
                value = self._value(whole_var)
                out += [_text(v) for v in value] if isinstance(value, list) else [_text(value)]
                i = whole_var.end()
                continue
            while i < n and not line[i].isspace():
                ch = line[i]
                if ch == "'":
                    end = i + 1
                    while True:
                        end = line.find("'", end)
                        if end < 0:
                            raise PwshError(f"unterminated ' in: {line}")
                        if end + 1 < n and line[end + 1] == "'":
                            end += 2
                            continue
                        break
                    parts.append(line[i + 1 : end].replace("''", "'"))
                    i = end + 1
                elif ch == '"':
                    end, buf = i + 1, []
                    while end < n and line[end] != '"':
                        if line[end] == "`" and end + 1 < n:
                            buf.append(_ESCAPES.get(line[end + 1], line[end + 1]))
                            end += 2
                            continue
                        m = _VAR.match(line, end)
                        if m:
                            buf.append(_text(self._value(m)))
                            end = m.end()
                            continue
                        buf.append(line[end])
                        end += 1
                    if end >= n:
                        raise PwshError(f'unterminated " in: {line}')
                    parts.append("".join(buf))
                    i = end + 1
                elif ch == "`" and i + 1 < n:
                    parts.append(line[i + 1])
                    i += 2
                elif ch in "(){}":
                    raise PwshError(f"a subexpression or script block in an entry point's line: {line}")
                else:
                    m = _VAR.match(line, i)
                    if m:
                        parts.append(_text(self._value(m)))
                        i = m.end()
                    else:
                        parts.append(ch)
                        i += 1
            word = "".join(parts)
            out.append(word)
        return out

    def assign(self, stmt: str) -> bool:
        """Apply ``$name = value`` / ``$env:NAME = value``; False when `stmt` is no assignment."""
        m = re.match(r"\$(env:)?([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(.*)$", stmt)
        if not m:
            return False
        is_env, name, rhs = bool(m.group(1)), m.group(2), m.group(3).strip()
        value = self.evaluate(rhs)
        if is_env:
            self.env[name] = _text(value)
        else:
            self.vars[name.lower()] = value
        return True

    def evaluate(self, rhs: str):
        """The value of an assignment's right-hand side, for the forms of the module docstring."""
        split = re.fullmatch(r"(.+?)\s+-split\s+(.+)", rhs)
        if split:
            (left,) = self.words(split.group(1)) or [""]
            (pattern,) = self.words(split.group(2))
            return re.split(pattern, left)
        if rhs.startswith("@(") and rhs.endswith(")"):
            return [w for item in _split_outside_quotes(rhs[2:-1], ",") for w in self.words(item.strip())]
        words = self.words(rhs)
        if len(words) == 1:
            var = _VAR.fullmatch(rhs)
            return self._value(var) if var else words[0]
        return " ".join(words)


def _text(value) -> str:
    if value is True:
        return "True"
    if value is False:
        return "False"
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)  # an array in a string: $OFS, a space
    return str(value)


ENTRY_COMMANDS = ("nox", "python", "python3", "py")


def native_calls(script: str, env: dict[str, str]) -> list[list[str]]:
    """The argument vectors (command first) of the entry point calls (ENTRY_COMMANDS) `script` makes,
    with its assignments applied in order."""
    sh = Shell(env)
    calls = []
    for stmt in statements(script):
        if sh.assign(stmt):
            continue
        first = stmt.split(None, 1)[0]
        if first.lower().removesuffix(".exe") in ENTRY_COMMANDS:
            calls.append(sh.words(stmt))
    return calls


def _group_names() -> list[str]:
    from release import manifest

    return [g["name"] for g in manifest.load()["arch_groups"]]


def entry_point(argv: list[str]) -> tuple[str, argparse.ArgumentParser, list[str]] | None:
    """(what, parser, its argv) of a call to this project's entry points, or None when it is none of
    them (the rehearsal then leaves it alone). Raises PwshError for a nox command line nox refuses."""
    cmd = argv[0].lower().removesuffix(".exe")
    if cmd == "nox":
        rest = argv[1:]
        posargs = rest[rest.index("--") + 1 :] if "--" in rest else []
        before = rest[: rest.index("--")] if "--" in rest else rest
        session = ""
        i = 0
        while i < len(before):
            if before[i] in ("-s", "--session", "--sessions", "-e"):
                session = before[i + 1] if i + 1 < len(before) else ""
                i += 2
            elif before[i] in ("-v", "--verbose", "-R", "--no-venv", "--force-color", "--no-color"):
                i += 1
            else:
                raise PwshError(f"nox: unrecognized argument {before[i]!r} before '--' (session arguments go after --)")
        groups = _group_names()
        if session == "archive_gather":
            from release.archive import archives

            return f"nox -s {session}", archives.parser(), ["gather", *posargs]
        kind, _, group = session.partition("_")
        if group in groups and kind == "archive":
            from release.archive import archives

            return f"nox -s {session}", archives.parser(), ["build", "--arch-group", group, *posargs]
        if group in groups and kind == "wheel":
            from release.sessions import wheels

            return f"nox -s {session}", wheels.parser(), ["--arch-group", group, *posargs]
        return None
    if cmd in ("python", "python3", "py") and len(argv) > 2 and argv[1] == "-m":
        parser = _module_parser(argv[2])
        if parser is not None:
            return f"python -m {argv[2]}", parser, argv[3:]
    return None


def _module_parser(module: str) -> argparse.ArgumentParser | None:
    """The argparse parser of a ``python -m <module>`` entry point the workflows call, None for a module
    without one (their own argument checks run in the rehearsal proper). Imported by name here, not
    by a computed import, so the release package's import graph shows the edge."""
    if module == "release.ship.gates":
        from release.ship import gates

        return gates.parser()
    if module == "release.plan.matrix":
        from release.plan import matrix

        return matrix.parser()
    if module == "release.plan.plan":
        from release.plan import plan

        return plan.parser()
    if module == "release.archive.archives":
        from release.archive import archives

        return archives.parser()
    if module == "release.sessions.wheels":
        from release.sessions import wheels

        return wheels.parser()
    return None


def check_call(argv: list[str]) -> str | None:
    """None when the entry point's own parser accepts `argv`, else its error line (what argparse
    prints before exit 2, as the step's log on GitHub would show it)."""
    return _check_call(tuple(argv))


@functools.lru_cache(maxsize=4096)  # a matrix repeats the same call per leg; parsers are costly to build
def _check_call(argv: tuple[str, ...]) -> str | None:
    argv = list(argv)
    try:
        found = entry_point(argv)
    except PwshError as e:
        return str(e)
    if found is None:
        return None
    what, parser, args = found
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(args)
    except SystemExit as e:
        if e.code not in (0, None):
            last = [x for x in err.getvalue().splitlines() if x.strip()]
            return f"{what} refuses its arguments {args!r}: {last[-1] if last else f'exit {e.code}'}"
    return None


def check_script(script: str, env: dict[str, str]) -> list[str]:
    """The refusals of every entry point call in a pwsh `script` run with `env` (empty: all parse)."""
    try:
        calls = native_calls(script, env)
    except PwshError as e:
        return [str(e)]
    return [msg for call in calls if (msg := check_call(call))]
