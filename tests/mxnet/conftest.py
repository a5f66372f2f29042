"""The MXNet tests run in their own environment, `.venv-mxnet` (`make test-mxnet`, which
`make test` runs after the main suite): mxnet 1.9.1 needs numpy<1.24, which the main
environment cannot share. The main suite therefore does not collect this folder when mxnet
does not import; this is not a silent skip, because `make test` runs these tests in the
second environment, where they are collected and must pass."""

from __future__ import annotations

import importlib.util
import warnings

_spec = importlib.util.find_spec("mxnet")
if _spec is None or _spec.origin is None:  # origin None: this folder seen as a namespace package
    collect_ignore_glob = ["test_*.py"]  # run by `make test-mxnet` in .venv-mxnet instead
else:
    # mxnet 1.9.1 reads aliases NumPy deprecated (np.bool) when it is imported: import it once
    # here, so the suite's `filterwarnings = error` applies to what the tests do, not to that
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import mxnet  # noqa: F401
