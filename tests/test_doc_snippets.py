"""Every Python block of the README and of the site's pages runs: the blocks of one page in order, in one fresh
interpreter (as a reader would paste them), from the checkout's root. A block that stopped working fails here,
naming its page and line. (Command blocks: tests/test_doc_commands.py composes them; the README's are run for real
by tests/test_readme_snippets.py.)"""

import os
import subprocess
import sys

import pytest

from doc_snippets import PAGES, ROOT, blocks

PYTHON_PAGES = [p for p in PAGES if blocks(p, "python")]


def test_not_run_blocks_say_why():
    """A block marked not to be run gives its reason (the marker cannot silence a block without one)."""
    for page in PAGES:
        for b in blocks(page):
            assert b.not_run is None or len(b.not_run.strip()) >= 10, f"{b.id}: a not-run marker needs a reason"


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PYTHON_PAGES])
def test_a_page_s_python_blocks_run(page, tmp_path):
    runnable = [b for b in blocks(page, "python") if b.not_run is None]
    if not runnable:
        pytest.skip("every Python block of this page is marked not run")
    script = "\n".join(f"# {b.id}\n{b.text}" for b in runnable)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{[b.id for b in runnable]} failed:\n{r.stderr[-3000:]}"
