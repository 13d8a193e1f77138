"""Every ``isparse-run`` and ``isparse-plan`` command of the README's and the site's (``docs/*.md``) command blocks
composes and passes the config's checks, every job of a sweep (``-m``) too: a documented override that stopped
composing (a renamed key, a removed group option, a value the schema refuses) fails here, naming the page and the
command. (The README's commands are also run for real: tests/test_readme_snippets.py.)"""

import re
import shlex

import pytest

from composing import SLOW_TO_COMPOSE, check_command

from doc_snippets import PAGES, ROOT, blocks

README = ROOT / "README.md"
#: flags that take no part in composing (Hydra's and isparse-plan's); ``--cfg job`` prints the composed config
FLAGS = {"-m": "multirun", "--multirun": "multirun", "--json": "json", "--help": "help", "--hydra-help": "help",
         "--cfg": "cfg", "--resolve": None, "-c": "cfg"}


def page_commands(pages=PAGES) -> list[tuple[str, str, str]]:
    """(page, program, command line) of every isparse-run / isparse-plan command in the pages' ```bash blocks (line
    continuations joined; an environment assignment before it and a ``.venv/bin/`` prefix dropped)."""
    out = []
    for page in pages:
        for block in blocks(page, "bash"):
            text = re.sub(r"\\\n\s*", " ", block.text)
            for line in text.splitlines():
                line = line.split(" #", 1)[0].strip()
                m = re.search(r"(?:^|\s)(?:\S*/)?(isparse-run|isparse-plan)(\s.*|$)", line)
                if m and not line.startswith("#"):
                    out.append((page.relative_to(ROOT).as_posix(), m.group(1), m.group(2).strip()))
    return out


COMMANDS = page_commands()


def test_the_pages_have_commands():
    """The parser finds the commands (a page rewritten in another form must not make this test vacuous)."""
    assert len(COMMANDS) >= 10, COMMANDS
    readme = [(p, c) for page, p, c in COMMANDS if page == "README.md"]
    assert ("isparse-run", "") in readme                            # the first command: the default run
    assert any(" -m " in f" {c} " for _, c in readme)              # and a sweep
    assert any(p == "isparse-plan" for _, p, _ in COMMANDS)


@pytest.mark.parametrize("page, program, command", [
    pytest.param(*x, marks=pytest.mark.slow) if any(f"+experiment={e}" in x[2] for e in SLOW_TO_COMPOSE) else x
    for x in COMMANDS], ids=[f"{pg}: {p} {c}"[:90] for pg, p, c in COMMANDS])
def test_a_documented_command_composes(page, program, command, monkeypatch, tmp_path):
    monkeypatch.setenv("PWD", str(tmp_path))
    words = shlex.split(command.replace("$PWD", str(tmp_path)))
    if any(w in ("--help", "--hydra-help") for w in words):
        pytest.skip("a help command: nothing to compose")
    multirun = any(FLAGS.get(w) == "multirun" for w in words)
    overrides = [w for w in words if w not in FLAGS and w not in ("job", "...")]   # "...": the rest elided
    if "--json" in words:
        overrides.append("plan.json=true")
    configs = check_command(overrides, multirun=multirun, config_name="plan" if program == "isparse-plan" else "config")
    assert configs


@pytest.mark.parametrize("command", ["cluster=nonexistent workers.N=3", "workers.N=3", "-m algorithm=isega,nope",
                                     "tau=2"])
def test_a_command_that_does_not_compose_fails_the_check(command):
    """The check the documented commands pass cannot pass everything (issue 20: it once returned silently)."""
    from isparse import ConfigError

    words = shlex.split(command)
    with pytest.raises(ConfigError):
        check_command([w for w in words if w != "-m"], multirun="-m" in words)
