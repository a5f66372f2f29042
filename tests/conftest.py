"""How `make test` shares the suite out between pytest-xdist's two workers (`-n 2 --dist
loadfile`): each test file runs whole in one worker, so that a module-scoped training is made
once, not once a worker; the test files of one group below, which share a costly
session-scoped recording, run in one worker together, so that it is made once too; and the
test files of one folder below run in one worker, one after the other."""

from __future__ import annotations

from typing import Any

import pytest

# test files that read the same session-scoped recordings (fixtures of tests/rules/conftest.py)
SHARED = {
    "tests/rules/test_columns.py": "tests/rules/test_rank_divergence.py",  # ddp_jobs: gloo jobs
    "tests/rules/test_diagnosis.py": "tests/rules/test_default_hook.py",  # defect_table_runs
}

# each starts a Dask LocalCluster, whose scheduler listens on port 8787 (distributed's default,
# even with no dashboard): a second one at the same time warns that the port is taken, and the
# suite's filterwarnings=error fails the test
ONE_WORKER_FOLDERS = ("tests/scale/",)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None  # another way of sharing out, asked for by name: xdist's own
    from xdist.scheduler import LoadFileScheduling

    class FileGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            folder = next((f for f in ONE_WORKER_FOLDERS if path.startswith(f)), None)
            return folder or SHARED.get(path, path)

    return FileGroups(config, log)
