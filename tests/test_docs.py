"""The README's numbers, commands and pasted outputs agree with what the code says and prints."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT, run_subprocess
from meshlint.frameworks.versions import VERSIONS
from meshlint.engine.ruleset import load_rules

README = (ROOT / "README.md").read_text(encoding="utf-8")
# The prose docs that quote commands (the generated rules.md and refusals*.md are checked by their own tests)
DOCS = {path.name: path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))
        if path.name not in ("rules.md", "refusals.md", "refusals-megatron.md")}
QUICK_START_1 = "meshlint check fixtures/kempnerforge fixtures/torchtitan fixtures/native"
# Outputs with timings in them are shown but cannot be compared
UNCOMPARABLE = ("smoke",)


def _text_blocks(text: str) -> list[list[str]]:
    """The lines of each ```text block."""
    return [block.split("\n") for block in re.findall(r"^```text\n(.*?)^```", text, re.S | re.M)]


def _shown_runs(text: str) -> list[tuple[str, list[str]]]:
    """Each `$ meshlint ...` line of a text block, with the output lines shown under it (up to the next `$`)."""
    runs = []
    for lines in _text_blocks(text):
        command, shown = None, []
        for line in lines + ["$ end"]:
            if line.startswith("$ "):
                if command is not None and command.startswith("meshlint "):
                    runs.append((command, shown))
                command, shown = line[2:], []
            elif command is not None:
                shown.append(line)
    return runs


def _mentioned_commands(text: str) -> set[str]:
    """The subcommand of every `meshlint X` written as code: inline spans and lines of code blocks."""
    code = re.findall(r"`([^`\n]+)`", text)
    code += re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    found = set()
    for chunk in code:
        for line in chunk.split("\n"):
            match = re.match(r"\s*(?:\$ )?meshlint ([a-z][a-z-]*)\b(?![:.])", line)
            if match:
                found.add(match.group(1))
    return found


def _cli_commands() -> set[str]:
    result = run_subprocess("--help")
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:", 1)[1]
    return {line.split()[0] for line in commands.splitlines() if line.strip()}


def test_rule_count_is_the_number_of_built_in_rules():
    stated = re.search(r"The rules \((\d+) built in", README)
    assert stated, "the README no longer states the rule count where this test looks for it"
    assert int(stated.group(1)) == len(load_rules())


def test_version_count_is_the_number_of_modelled_versions():
    stated = re.search(r"lists the (\d+) modelled versions", README)
    assert stated, "the README no longer states the number of framework versions where this test looks for it"
    assert int(stated.group(1)) == len(VERSIONS)


def test_every_command_the_docs_name_exists():
    commands = _cli_commands()
    for name, text in {"README.md": README, **DOCS}.items():
        mentioned = _mentioned_commands(text)
        assert mentioned or name != "README.md", "README.md: no `meshlint <command>` found: the extraction is broken"
        assert mentioned <= commands, f"{name} names commands meshlint lacks: {sorted(mentioned - commands)}"
    assert {"check", "explain", "diff", "suggest", "fix", "rules", "schema", "versions", "smoke"} \
        <= _mentioned_commands(README)


def test_quick_start_output_is_what_command_1_prints():
    assert f"&& {QUICK_START_1}\n" in README, "the quick start's command 1 changed"
    runs = [shown for command, shown in _shown_runs(README) if command == QUICK_START_1]
    assert runs, "the README no longer shows command 1's output"
    result = run_subprocess(*shlex.split(QUICK_START_1)[1:], env={"MESHLINT_NO_CACHE": "1", "NO_COLOR": "1"})
    assert result.returncode == 1
    printed = result.stdout.rstrip("\n").split("\n")
    shown = [line for line in runs[0] if line]
    assert shown[-1] == printed[-1], "the summary line shown is not the one command 1 prints"
    assert shown[-2] == printed[-2], "the skip-note line shown is not the one command 1 prints"


RUNS = [(name, command, shown) for name, text in {"README.md": README, **DOCS}.items()
        for command, shown in _shown_runs(text) if shlex.split(command)[1] not in UNCOMPARABLE]


@pytest.mark.parametrize("name,command,shown", RUNS, ids=[f"{name}:{command[9:60]}" for name, command, _ in RUNS])
def test_pasted_output_is_what_the_command_prints(name, command, shown):
    """Every line shown under `$ meshlint ...` is printed by it, in that order ('...' stands for lines left out)."""
    args = shlex.split(command)[1:]
    result = run_subprocess(*args, env={"MESHLINT_NO_CACHE": "1", "NO_COLOR": "1"})
    assert "Traceback" not in result.stderr, result.stderr
    stdout, stderr = result.stdout.split("\n"), set(result.stderr.split("\n"))
    position = 0
    for line in shown:
        if not line.strip() or line.strip() == "...":
            continue
        if line in stderr:
            continue
        assert line in stdout[position:], f"{name}: `{command}` does not print (here, in this order):\n{line}"
        position = stdout.index(line, position) + 1


def test_shown_runs_are_found():
    """The extraction itself: the README pastes the output of each static command at least once."""
    shown = {shlex.split(command)[1] for command, _ in _shown_runs(README)}
    assert {"check", "explain", "diff", "suggest", "fix", "rules", "versions"} <= shown


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_relative_links_and_anchors_resolve():
    for name, text in {"README.md": README, **{f"docs/{n}": t for n, t in DOCS.items()}}.items():
        base = (ROOT / name).parent
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (base / path).resolve() if path else ROOT / name
            assert file.exists(), f"{name}: link to {target}: no such file"
            if anchor and file.suffix == ".md":
                assert anchor in _anchors(file.read_text(encoding="utf-8")), f"{name}: link to {target}: no such heading"


def test_schema_key_counts_are_the_generated_ones():
    import json

    stated = re.search(r"KempnerForge (\d+) keys, torchtitan 0\.1\.0 (\d+), 0\.2\.x (\d+), 0\.3\.0 (\d+), main (\d+)",
                       DOCS["frameworks.md"])
    assert stated, "docs/frameworks.md no longer states the schemas' key counts where this test looks for them"
    files = ("kempnerforge-5666d0d", "torchtitan-0.1.0", "torchtitan-0.2.x", "torchtitan-0.3.0",
             "torchtitan-main@b5bcd76c6")
    counts = [json.loads((ROOT / "meshlint" / "data" / "schema" / f"{name}.json").read_text())["counts"]["keys"]
              for name in files]
    assert [int(n) for n in stated.groups()] == counts
