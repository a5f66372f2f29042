"""check_input_images: smdebug's name for `not_normalized_data` on images."""

from __future__ import annotations

from mldbg.rules.base import register
from mldbg.rules.builtin.not_normalized_data import NotNormalizedData


@register
class CheckInputImages(NotNormalizedData):
    """Input images are not normalized per channel: `not_normalized_data` with `channel=1`
    (channels-first), kept under smdebug's name. Not in the default set, because
    `not_normalized_data` is (it would report the same inputs twice).
    """

    default = False
    channel: int | None = 1
