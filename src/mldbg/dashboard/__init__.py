"""The live dashboard of one or more runs: `mldbg dashboard PATH...` (needs `mldbg[dashboard]`).

`create_app(paths, rules=None, refresh_seconds=1.0)` builds the FastAPI app; the JSON
endpoints are listed in app.py and docs/dashboard.md. FastAPI is imported only when an app is
built, so importing this package costs nothing.
"""

from mldbg.dashboard.app import create_app
from mldbg.dashboard.data import Dashboard, RunData

__all__ = ["Dashboard", "RunData", "create_app"]
