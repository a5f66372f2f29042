"""Which Dask cluster a sweep runs on: the one given, the current one, or a local one of its own.

Dask (`mldbg[dask]`) is imported here, when a sweep starts, never at `import mldbg`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from mldbg.errors import InvalidConfig

if TYPE_CHECKING:
    from distributed import Client, Future

ClientSpec = Any  # a distributed.Client, a scheduler address ("tcp://host:8786"), or None


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as e:  # pragma: no cover - the extra is part of [all]
        raise InvalidConfig(
            f"sweeps run on Dask, which is not installed ({e}): pip install 'mldbg[dask]'"
        ) from None
    return distributed


@contextmanager
def dask_client(
    client: ClientSpec = None, n_workers: int | None = None, jobs: int | None = None
) -> Iterator[Client]:
    """A Dask client for the duration of a sweep.

    `client` is used as given; an address string connects to that scheduler (and disconnects
    afterwards, leaving the cluster running); None takes the current client (`Client.current()`)
    if there is one, else Dask's `scheduler-address` setting (`$DASK_SCHEDULER_ADDRESS`) if
    set, else starts a `LocalCluster` of processes with one thread each, `n_workers` of them
    (default: one per core, no more than `jobs`), and closes it afterwards.
    """
    distributed = _distributed()
    if client is None:
        try:
            client = distributed.Client.current()
        except ValueError:  # no client in this process
            import dask

            client = dask.config.get("scheduler-address", None)  # $DASK_SCHEDULER_ADDRESS
    if isinstance(client, distributed.Client):
        yield client
        return
    if isinstance(client, str):
        try:
            connected = distributed.Client(client, set_as_default=False, timeout="10s")
        except OSError as e:
            raise InvalidConfig(f"cannot reach the Dask scheduler at {client!r}: {e}") from None
        try:
            yield connected
        finally:
            connected.close()
        return
    if client is not None:
        raise InvalidConfig(f"client={client!r}: give a distributed.Client, a scheduler address, or None")
    size = n_workers or max(1, min(os.cpu_count() or 1, jobs or os.cpu_count() or 1))
    with (
        # its dashboard on a free port: None still binds 8787, and a second cluster at once warns
        distributed.LocalCluster(
            n_workers=size, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as local,
    ):
        yield local


def run_tasks(
    client: Client,
    fn: Callable[..., Any],
    *iterables: Iterable[Any],
    progress: bool = False,
    desc: str = "runs",
    **kwargs: Any,
) -> list[tuple[Any, BaseException | None]]:
    """`fn(*args, **kwargs)` for every tuple of args of the zipped `iterables`, one Dask task
    each, in order: (result, None), or (None, the exception) for a task that failed or whose
    worker died. Nothing raises for one task, so one bad run never stops the others."""
    columns = [list(it) for it in iterables]
    n = len(columns[0]) if columns else 0
    if n == 0:
        return []
    futures: list[Future] = client.map(fn, *columns, pure=False, **kwargs)
    position = {f.key: i for i, f in enumerate(futures)}
    out: list[tuple[Any, BaseException | None]] = [(None, None)] * n
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, desc=desc, unit="run", leave=False)
    try:
        for future in _distributed().as_completed(futures, loop=client.loop):
            i = position[future.key]
            if future.status == "finished":
                out[i] = (future.result(), None)
            else:  # an error, or a worker lost (KilledWorker) or the task cancelled
                try:
                    out[i] = (None, future.exception())
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as e:  # asyncio's CancelledError is no Exception
                    out[i] = (None, e)
            future.release()
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    return out
