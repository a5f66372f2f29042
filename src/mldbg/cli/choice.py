"""`Choice`: click's choice of fixed words, whose refusal names the closest word, as every other
usage error of the command line does (`--mode trian` -> `did you mean 'train'?`)."""

from __future__ import annotations

from typing import Any

import click

from mldbg.errors import did_you_mean


class Choice(click.Choice):
    """click.Choice with a "did you mean" in its error; use it for every fixed set of words."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            words = [str(c) for c in self.choices]
            hint = did_you_mean(value, words)
            raise click.BadParameter(
                f"{str(value)!r} is not one of {', '.join(map(repr, words))}{hint}", ctx=ctx, param=param
            ) from None
