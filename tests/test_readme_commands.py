"""Every ``isparse-run`` and ``isparse-plan`` command of the README's command blocks composes and passes the config's
checks, every job of a sweep (``-m``) too: a documented override that stopped composing (a renamed key, a removed
group option, a value the schema refuses) fails here, naming the command."""

import re
import shlex
from pathlib import Path

import pytest

from composing import check_command

README = Path(__file__).resolve().parents[1] / "README.md"
#: flags that take no part in composing (Hydra's and isparse-plan's); ``--cfg job`` prints the composed config
FLAGS = {"-m": "multirun", "--multirun": "multirun", "--json": "json", "--help": "help", "--hydra-help": "help",
         "--cfg": "cfg", "--resolve": None, "-c": "cfg"}


def readme_commands() -> list[tuple[str, str]]:
    """(program, command line) of every isparse-run / isparse-plan command in the README's ```bash blocks (line
    continuations joined; an environment assignment before it and a ``.venv/bin/`` prefix dropped)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            line = line.split(" #", 1)[0].strip()
            m = re.search(r"(?:^|\s)(?:\S*/)?(isparse-run|isparse-plan)(\s.*|$)", line)
            if m and not line.startswith("#"):
                out.append((m.group(1), m.group(2).strip()))
    return out


COMMANDS = readme_commands()


def test_the_readme_has_commands():
    """The parser finds the README's commands (a README rewritten in another form must not make this test vacuous)."""
    assert len(COMMANDS) >= 10, COMMANDS
    assert ("isparse-run", "") in COMMANDS                          # the first command: the default run
    assert any(p == "isparse-plan" for p, _ in COMMANDS) and any(" -m " in f" {c} " for _, c in COMMANDS)


@pytest.mark.parametrize("program, command", COMMANDS, ids=[f"{p} {c}"[:80] for p, c in COMMANDS])
def test_a_readme_command_composes(program, command, monkeypatch, tmp_path):
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
    """The check the README's commands pass cannot pass everything (issue 20: it once returned silently)."""
    from isparse import ConfigError

    words = shlex.split(command)
    with pytest.raises(ConfigError):
        check_command([w for w in words if w != "-m"], multirun="-m" in words)
