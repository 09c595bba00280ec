"""The documentation says what the code does: links resolve, commands and params keys exist, params comments carry
no measurements, and the README stays a front door (at most 200 lines)."""

from __future__ import annotations

import argparse
import dataclasses
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PIPELINE_DOC = ROOT / "docs" / "pipeline.md"
PARAMS_FILES = [ROOT / "params.yaml", *sorted(ROOT.glob("params.*.yaml"))]
README_MAX_LINES = 200

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e-?\d+)?(?![\w.]*\d)")
WHY_LINK = re.compile(r"(docs/[\w./-]+\.md)(#[\w-]+)?")


def doc_files() -> list[Path]:
    """Every page a reader meets: the README, docs/ (experiments included) and each environment's README."""
    return [README, *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "envs").glob("*/README.md"))]


def where(path: Path, line: int) -> str:
    """`path:line`, relative to the project root."""
    return f"{path.relative_to(ROOT)}:{line}"


def prose_and_code(text: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, line, inside a fenced code block) for every line of a markdown text."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        yield number, line, fenced


def commands(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The shell commands a page shows: each code span, and each line of a fenced block, as words with leading
    `VAR=value` assignments and a `$ ` prompt dropped."""
    for number, line, fenced in prose_and_code(path.read_text(encoding="utf-8")):
        pieces = [re.sub(r"(^|\s)#.*$", "", line)] if fenced else CODE_SPAN.findall(line)
        for piece in pieces:
            for part in re.split(r"&&|\|\||;|\|", piece):
                words = part.split()
                while words and (words[0] == "$" or ENV_ASSIGNMENT.match(words[0])):
                    words = words[1:]
                if words:
                    yield number, words


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (but `-` and `_`), spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown page, with GitHub's `-1`, `-2` suffixes for repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    for _, line, fenced in prose_and_code(path.read_text(encoding="utf-8")):
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


def link_problem(page: Path, target: str) -> str | None:
    """Why a relative link from `page` does not resolve (None when it does); web links are not checked."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None
    file_part, _, fragment = target.partition("#")
    resolved = (page.parent / file_part).resolve() if file_part else page
    if not resolved.exists():
        return f"links to {target!r}, but {resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved} does not exist"
    if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
        return f"links to {target!r}, but {resolved.relative_to(ROOT)} has no heading with anchor #{fragment}"
    return None


def test_readme_is_a_front_door():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move reference to docs/ and measurements to "
        "docs/experiments/, and link them"
    )


def test_every_relative_link_resolves():
    problems = []
    for page in doc_files():
        for number, line, fenced in prose_and_code(page.read_text(encoding="utf-8")):
            for target in [] if fenced else LINK.findall(line):
                problem = link_problem(page, target)
                if problem:
                    problems.append(f"{where(page, number)}: {problem}")
    assert not problems, "broken links in the docs:\n" + "\n".join(problems)


def comment_of(line: str) -> tuple[str, str]:
    """(value part, comment) of a YAML line; a `#` inside quotes or not after a space is not a comment."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i], line[i + 1 :]
    return line, ""


@pytest.mark.parametrize("params_file", PARAMS_FILES, ids=lambda p: p.name)
def test_params_comments_carry_no_measurements(params_file):
    problems = []
    for number, line in enumerate(params_file.read_text(encoding="utf-8").splitlines(), 1):
        value, comment = comment_of(line)
        if "measured" in comment.lower():
            problems.append(f"{where(params_file, number)}: says 'measured': {comment.strip()!r}")
        own = {float(x) for x in DECIMAL.findall(value)} | {
            float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", value)
        }
        figures = [x for x in DECIMAL.findall(comment) if float(x) not in own]
        if figures:
            problems.append(
                f"{where(params_file, number)}: quotes {', '.join(figures)}, not the key's own value: "
                f"{comment.strip()!r}"
            )
        for doc, fragment in WHY_LINK.findall(comment):
            problem = link_problem(ROOT / "params.yaml", doc + fragment)
            if problem:
                problems.append(f"{where(params_file, number)}: {problem}")
    assert not problems, (
        "params comments say what a key means and its unit, and link to docs/experiments/ for why a value was "
        "chosen; move these figures there:\n" + "\n".join(problems)
    )


def makefile_targets() -> set[str]:
    """The targets the Makefile defines (rules, not variable assignments)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_][\w.-]*)\s*:(?!=)", text, re.MULTILINE)}


def test_every_make_target_in_the_docs_exists():
    targets = makefile_targets()
    problems = []
    for page in doc_files():
        for number, words in commands(page):
            if words[0] != "make" or len(words) < 2:
                continue
            named = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
            problems += [
                f"{where(page, number)}: `make {t}` is not a target of the Makefile"
                for t in named
                if t not in targets
            ]
    assert not problems, f"the Makefile's targets are {sorted(targets)}:\n" + "\n".join(problems)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands, name -> parser ({} when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_wander_subcommand_in_the_docs_exists():
    from wander.cli import build_parser

    top = subcommands(build_parser())
    problems = []
    for page in doc_files():
        for number, words in commands(page):
            if words[0] != "wander":
                continue
            rest = [w for w in words[1:] if w != "--verbose"]
            if not rest or rest[0].startswith("-"):
                continue  # `wander --help`, or the command's name alone
            name, parser = rest[0], top.get(rest[0])
            if parser is None:
                problems.append(
                    f"{where(page, number)}: `wander {name}` is not a subcommand; there are {sorted(top)}"
                )
                continue
            nested = subcommands(parser)
            if nested and (len(rest) < 2 or rest[1] not in nested):
                said = " ".join(rest[:2])
                problems.append(
                    f"{where(page, number)}: `wander {said}`: `wander {name}` takes one of {sorted(nested)}"
                )
    assert not problems, (
        "the docs name wander subcommands that wander.cli.build_parser() lacks:\n" + "\n".join(problems)
    )


def unwrap(annotation: object) -> object:
    """`X | None` -> `X` (an annotation with one non-None member)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def params_key_problem(dotted: str) -> str | None:
    """Why `section.key[.sub...]` is not a key of the params model (None when it is). A dict's keys and a section
    that allows extra keys (`env`'s per-environment blocks) accept any name below them."""
    from tasks.params.sections import Params

    current: object = Params
    walked = []
    for part in dotted.split("."):
        current = unwrap(current)
        fields = getattr(current, "model_fields", None) or getattr(current, "__pydantic_fields__", None)
        if typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        elif fields is not None:
            if part in fields:
                current = fields[part].annotation
            elif getattr(current, "model_config", {}).get("extra") == "allow":
                return None
            else:
                where_ = ".".join(walked) or "params.yaml"
                return f"{where_} has no key {part!r}; its keys are {sorted(fields)}"
        elif dataclasses.is_dataclass(current):
            names = [f.name for f in dataclasses.fields(current)]
            if part not in names:
                return f"{'.'.join(walked)} has no key {part!r}; its keys are {sorted(names)}"
            current = next(f.type for f in dataclasses.fields(current) if f.name == part)
        elif current is typing.Any:
            return None
        else:
            return f"{'.'.join(walked)} is a value ({current}), it has no key {part!r}"
        walked.append(part)
    return None


def test_every_params_key_in_the_pipeline_doc_exists():
    from tasks.params.sections import Params

    sections = "|".join(sorted(Params.model_fields, key=len, reverse=True))
    mention = re.compile(rf"(?<![\w./$-])(?:{sections})(?:\.[A-Za-z_][\w-]*)+")
    problems = []
    for number, line in enumerate(PIPELINE_DOC.read_text(encoding="utf-8").splitlines(), 1):
        for dotted in mention.findall(line):
            problem = params_key_problem(dotted)
            if problem:
                problems.append(f"{where(PIPELINE_DOC, number)}: `{dotted}`: {problem}")
    assert not problems, "docs/pipeline.md names params keys the params model lacks:\n" + "\n".join(problems)


REPO_PATH = re.compile(r"(?<![\w./-])((?:wander|envs|tasks|flows|tests|bench|docs)/[\w./-]*)")
DOTTED = re.compile(r"(?<![\w./-])((?:wander|envs|tasks|flows|bench)(?:\.[A-Za-z_]\w*)+)")


def dotted_problem(name: str) -> str | None:
    """Why `package.module[.attribute]` does not name a module of the project or a name defined in it (None when
    it does). Names whose second part is no module (MLflow tags such as `wander.promoted`) are not code: skipped."""
    parts = name.split(".")
    for i in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:i])
        found = next((c for c in (base.with_suffix(".py"), base / "__init__.py") if c.exists()), None)
        if found is None:
            continue
        if i == len(parts):
            return None
        attribute = parts[i]
        defined = rf"^\s*(?:(?:async )?def|class) {attribute}\b|^\s*{attribute}\s*[:=]|^from \S+ import .*\b{attribute}\b"
        if re.search(defined, found.read_text(encoding="utf-8"), re.MULTILINE):
            return None
        return f"{found.relative_to(ROOT)} defines no {attribute!r}"
    return None


def test_every_code_path_the_docs_quote_exists():
    problems = []
    for page in doc_files():
        for number, line, fenced in prose_and_code(page.read_text(encoding="utf-8")):
            for span in [line] if fenced else CODE_SPAN.findall(line):
                for path in REPO_PATH.findall(span):
                    path = path.rstrip(".")
                    if (
                        not any(mark in path for mark in ("<", "{", "*", "NAME"))
                        and not (ROOT / path).exists()
                    ):
                        problems.append(f"{where(page, number)}: `{path}` does not exist")
                for name in DOTTED.findall(span):
                    problem = dotted_problem(name)
                    if problem:
                        problems.append(f"{where(page, number)}: `{name}`: {problem}")
    assert not problems, "the docs quote code that is not there (moved or renamed?):\n" + "\n".join(problems)


def test_the_checks_catch_what_they_look_for(tmp_path):
    """Each check above fails on the mistake it is named for (so a silent regex cannot pass everything)."""
    page = ROOT / "docs" / "pipeline.md"
    assert link_problem(page, "no-such-page.md")
    assert link_problem(page, "training.md#no-such-heading")
    assert link_problem(page, "training.md#resume") is None
    assert link_problem(page, "https://example.com/x") is None
    assert params_key_problem("grpo.learning_rate") is None
    assert params_key_problem("grpo.stages.strong.temperature") is None
    assert params_key_problem("env.tictactoe.history") is None
    assert params_key_problem("synthesize.teacher.max_concurrency") is None
    assert "no key 'learning_rat'" in params_key_problem("grpo.learning_rat")
    assert "no key 'nope'" in params_key_problem("synthesize.teacher.nope")
    assert "no key" in params_key_problem("nosection.key")
    assert comment_of('extra_args: ["#x"]  # a comment') == ('extra_args: ["#x"]  ', " a comment")
    assert DECIMAL.findall("about 0.93 by step 30, 1e-4 and 5e-5, v1.2.3") == ["0.93"]
    page = tmp_path / "page.md"
    page.write_text(
        "run `make nope` and `wander nope`\n```bash\nX=1 make test\nprefect work-pool create wander --type process\n```\n"
    )
    assert [w for _, w in commands(page)] == [
        ["make", "nope"],
        ["wander", "nope"],
        ["make", "test"],
        ["prefect", "work-pool", "create", "wander", "--type", "process"],
    ]
    assert slug("Episodes on a served environment (`env.url`)") == "episodes-on-a-served-environment-envurl"
    assert dotted_problem("wander.core.replay.replay_problems") is None
    assert dotted_problem("tasks.runtime.fingerprint") is None
    assert "defines no 'nope'" in dotted_problem("wander.core.replay.nope")
    assert dotted_problem("wander.promoted") is None  # an MLflow tag, not code
