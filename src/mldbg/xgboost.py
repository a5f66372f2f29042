"""`mldbg.xgboost.Hook`: record an XGBoost training. See `mldbg.frameworks.xgboost`."""

from mldbg.frameworks.xgboost import Hook

__all__ = ["Hook"]
