"""scripts/test: how many pytest-xdist workers a run gets from its arguments (pytest itself stubbed out)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A checkout holding scripts/test, a setup-venv, ruff and mypy that do nothing, and a python that prints its
    arguments (what pytest would have been given), beside one test file."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "test")
    (tmp_path / "scripts" / "setup-venv").write_text("exit 0\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    for name, body in (("ruff", "exit 0"), ("mypy", "exit 0"), ("python", 'echo "$@"')):
        stub = tmp_path / ".venv" / "bin" / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("")
    return tmp_path


def environment(addopts: str = "") -> dict[str, str]:
    """This environment without the settings the script reads (a run of this test may have them: PYTHON=python3.13
    bash scripts/test), PYTEST_ADDOPTS set to ``addopts`` when given."""
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLSTORE_TEST_WORKERS", "PYTEST_ADDOPTS", "PYTHON")}
    return {**env, "PYTEST_ADDOPTS": addopts} if addopts else env


def workers(tree: Path, *args: str) -> str:
    env = environment()
    done = subprocess.run(
        ["bash", str(tree / "scripts" / "test"), *args], env=env, capture_output=True, text=True, check=True
    )
    given = done.stdout.split()
    assert not args or given[-len(args) :] == list(args), given  # the arguments go to pytest as they are
    return given[given.index("-n") + 1]


def test_a_run_naming_test_files_stays_in_one_process_and_only_such_a_run(tree: Path) -> None:
    """A test file (or a test in one) named stays in one process; the whole suite, a folder, a keyword or a marker
    runs on the workers. A file that is the value of an option is named by no run: ``--deselect tests/test_x.py::t``
    or ``--ignore tests/test_x.py`` ran the rest of the suite in one process. A debugger (--pdb, --trace) wants the
    terminal, which no worker has: xdist refused --pdb."""
    for args in [(), ("tests/",), ("-k", "x"), ("-m", "slow"), ("-x",)]:
        assert workers(tree, *args) == "4", args
    for args in [("--deselect", "tests/test_x.py::test_y"), ("--ignore", "tests/test_x.py"), ("-k", "tests/test_x.py")]:
        assert workers(tree, *args) == "4", args
    for args in [("tests/test_x.py",), ("tests/test_x.py::test_y",), ("-k", "y", "tests/test_x.py"), ("--pdb",)]:
        assert workers(tree, *args) == "0", args
    assert workers(tree, "--trace", "-k", "y") == "0"


def given(tree: Path, *args: str, addopts: str = "") -> list[str]:
    """What pytest is given by ``scripts/test ARGS`` (with ``PYTEST_ADDOPTS=addopts``), after ``-m pytest``."""
    env = environment(addopts)
    done = subprocess.run(
        ["bash", str(tree / "scripts" / "test"), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.split()[2:]


def test_a_run_without_xdist_is_given_no_workers_and_a_double_dash_is_passed_as_it_is(tree: Path) -> None:
    """``-p no:xdist`` (xdist not loaded) was run with the script's ``-n 4 --dist loadfile``, options pytest then does
    not know ('unrecognized arguments: -n'); it runs in one process with neither, wherever the -p is: pytest reads
    every -p before parsing, after a ``--`` too. The arguments, a ``--`` among them, follow the script's own, as
    given."""
    for args in [
        ("-p", "no:xdist"),
        ("-pno:xdist", "-k", "x"),
        ("tests/test_x.py", "-p", "no:xdist"),
        ("--", "tests/test_x.py", "-p", "no:xdist"),
        ("-k", "x", "--", "-p", "no:xdist"),
    ]:
        assert given(tree, *args) == ["-q", *args], args
    for args in [("-p", "no:cacheprovider"), ("-k", "no:xdist"), ("-p", "no:cacheprovider", "--", "-k", "x")]:
        assert given(tree, *args) == ["-q", "-n", "4", "--dist", "loadfile", *args], args
    assert given(tree, "--", "tests/test_x.py") == ["-q", "-n", "0", "--dist", "loadfile", "--", "tests/test_x.py"]


def test_a_run_without_xdist_in_pytest_addopts_is_given_no_workers(tree: Path) -> None:
    """``PYTEST_ADDOPTS="-p no:xdist" scripts/test`` was given ``-n 4 --dist loadfile``, which pytest without xdist
    does not know: the script read only its arguments. PYTEST_ADDOPTS's words are read as pytest reads them, before
    the arguments; other options there leave the workers be, and nothing of it is added to the arguments."""
    for addopts, args in [("-p no:xdist", ()), ("-x  -pno:xdist", ("-k", "x")), ("-p", ("no:xdist",))]:
        assert given(tree, *args, addopts=addopts) == ["-q", *args], addopts
    for addopts in ["-p no:cacheprovider", "-x", "-k no:xdist", " "]:
        assert given(tree, "-x", addopts=addopts) == ["-q", "-n", "4", "--dist", "loadfile", "-x"], addopts


def test_a_run_on_another_python_sets_up_and_uses_a_virtual_environment_of_its_version(tree: Path) -> None:
    """``PYTHON=python3.13 scripts/test`` ran in .venv, made by whichever Python made it first: the interpreter was
    not the one asked for. It sets up .venv-3.13 (its version's) and lints, type-checks and tests there; .venv is
    left as it is. Without PYTHON, .venv as before."""
    (tree / "scripts" / "setup-venv").write_text('echo "setup-venv $*"\n')
    python = tree / "python3.13"
    python.write_text("#!/bin/sh\necho 3.13\n")  # what the script asks it: its version
    python.chmod(0o755)
    (tree / ".venv-3.13" / "bin").mkdir(parents=True)
    for name in ("ruff", "mypy", "python"):
        stub = tree / ".venv-3.13" / "bin" / name
        stub.write_text(f'#!/bin/sh\necho ".venv-3.13 {name} $*"\n')
        stub.chmod(0o755)
    script = ["bash", str(tree / "scripts" / "test"), "-x"]
    done = subprocess.run(script, env={**environment(), "PYTHON": str(python)}, capture_output=True, text=True)
    assert done.stdout.splitlines() == [
        "setup-venv test .venv-3.13",
        ".venv-3.13 ruff check .",
        ".venv-3.13 ruff format --check .",
        ".venv-3.13 mypy ",
        ".venv-3.13 python -m pytest -q -n 4 --dist loadfile -x",
    ], done.stderr
    done = subprocess.run(script, env=environment(), capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["setup-venv test .venv", "-m pytest -q -n 4 --dist loadfile -x"]
