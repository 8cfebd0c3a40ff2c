"""The suite runs every folder's tests: pytest collects only the folders pytest.ini's testpaths names, so an app
left out of it has its tests skipped in silence, by `make test` and by CI alike."""

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_PROJECT = {".venv", ".harness", ".runtime", ".git", "var", "node_modules"}
# Task files: an example task's workspace may hold its own tests, for the agent to run, not for this suite.
TASK_FILES = {"examples"}


def test_every_folder_holding_tests_is_in_testpaths():
    config = configparser.ConfigParser()
    config.read(ROOT / "pytest.ini")
    testpaths = set(config["pytest"]["testpaths"].split())
    holding = {
        folder.name
        for folder in ROOT.iterdir()
        if folder.is_dir()
        and folder.name not in NOT_PROJECT | TASK_FILES
        and any(path for path in folder.rglob("test_*.py") if not NOT_PROJECT & set(path.parts))
    }
    assert "studies" in holding and "training" in holding  # the walk finds what it should
    assert holding - testpaths == set()
