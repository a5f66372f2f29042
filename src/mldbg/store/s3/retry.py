"""Which S3 errors are worth retrying, how (backoff with jitter, within a deadline), and what the
last attempts tell about the bucket: while it does not answer, only the uploader keeps probing it
and every other caller fails fast (or spills), so nobody waits on a dead endpoint twice.

boto3's own retries are off (`total_max_attempts=1`): the bounds here are the only ones.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger("mldbg")
T = TypeVar("T")

THROTTLED = {
    "SlowDown", "Throttling", "ThrottlingException", "RequestThrottled", "RequestLimitExceeded",
    "TooManyRequests", "TooManyRequestsException", "BandwidthLimitExceeded", "RequestTimeout",
    "RequestTimeoutException", "InternalError", "ServiceUnavailable", "PriorRequestNotComplete",
}  # fmt: skip
MISSING = {"NoSuchKey", "404", "NotFound"}
FIRST_DELAY = 0.05
MAX_DELAY = 2.0


def error_code(e: Any) -> str:
    """The S3 error code of a botocore `ClientError` ("NoSuchKey", "SlowDown", ...)."""
    return str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))


def http_status(e: Any) -> int:
    return int(getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def is_connection_error(e: BaseException) -> bool:
    """No answer at all (refused, timed out, reset): the bucket is unreachable."""
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    cause = getattr(e, "last_exception", None)
    if cause is not None and cause is not e:
        return is_connection_error(cause)
    return isinstance(e, (HTTPClientError, BotoConnectionError)) or (
        isinstance(e, OSError) and not isinstance(e, FileNotFoundError)
    )


def is_transient(e: BaseException) -> bool:
    """Worth retrying: no answer, throttling, a server-side error."""
    from botocore.exceptions import ClientError, IncompleteReadError, ResponseStreamingError

    if isinstance(e, ClientError):
        status = http_status(e)
        return error_code(e) in THROTTLED or status >= 500 or status in (408, 429)
    if isinstance(e, (ResponseStreamingError, IncompleteReadError)):
        return True
    return is_connection_error(e)


class Retries:
    """The retry policy of one store, and what its attempts found out.

    `down`: the last request got no answer; `failing`: it failed in any transient way (no
    answer, throttled, a server error); `last_error`: the message, for warnings.
    """

    def __init__(self, url: str, probe_seconds: float):
        self.url = url
        self.probe_seconds = probe_seconds
        self.down = False
        self.failing = False
        self.last_error = ""
        self._next_probe = 0.0

    def may_try(self, uploading: bool) -> bool:
        """While the bucket is unreachable, the uploader (`uploading`: it has work) probes it;
        others fail fast, except one attempt per `probe_seconds` when nothing uploads."""
        if not self.down:
            return True
        if uploading:
            return False
        now = time.monotonic()
        if now >= self._next_probe:
            self._next_probe = now + self.probe_seconds
            return True
        return False

    def call(self, fn: Callable[[], T], seconds: float) -> T:
        """`fn()` until it succeeds, raises a non-transient error, or `seconds` have passed."""
        deadline = time.monotonic() + seconds
        delay = FIRST_DELAY
        while True:
            try:
                out = fn()
            except Exception as e:
                if not is_transient(e):
                    raise
                self.failed(e)
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, MAX_DELAY)
                continue
            self.answered()
            return out

    def failed(self, e: BaseException) -> None:
        """Note a failed attempt; log a new kind of non-transient error once."""
        msg = f"{type(e).__name__}: {e}"
        self.failing = True
        if is_connection_error(e):
            self.down = True
            self._next_probe = time.monotonic() + self.probe_seconds
        if msg != self.last_error:
            self.last_error = msg
            if not is_transient(e):
                log.error("mldbg: %s: %s (will keep retrying)", self.url, msg)

    def answered(self) -> bool:
        """Note an answer; True when the bucket was unreachable until now."""
        was_down, self.down, self.failing = self.down, False, False
        return was_down
