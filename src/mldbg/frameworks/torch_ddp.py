"""A DistributedDataParallel model freed at the end of a script must not hang the worker.

The hang (PyTorch 2.13, gloo; a worker of about one 2-process job in 60 on a loaded machine): a
training function ends with `dist.barrier(); dist.destroy_process_group()` and returns. Its DDP
model is freed; the model's `Reducer` holds the last reference to the process group, and the
Reducer's Python object is freed without releasing the GIL (pybind11's plain `dealloc`), so
`~ProcessGroupGloo` joins the gloo worker threads *holding the GIL*. One of them may still be
finishing the barrier: freeing it frees an all-reduce it waited for (held by a weak reference
only), whose captured `at::ThreadLocalState` holds a Python object (the `contextvars.Context`
that `torch.autograd.graph._engine_run_backward` stashes during every backward; DDP launched the
all-reduce there). Dropping that object needs the GIL: the worker thread waits for the GIL, the
main thread waits for the worker thread, for ever. The stacks:

    main:            ... _PyFrame_Clear -> subtype_dealloc (DDP) -> dict_dealloc
                     -> pybind11 class_<c10d::Reducer>::dealloc_without_manipulating_gil
                     -> c10d::Reducer::~Reducer -> c10d::ProcessGroup::~ProcessGroup
                     -> c10d::ProcessGroupGloo::~ProcessGroupGloo -> std::thread::join
    pt_gloo_runloop: ProcessGroupGloo::runLoop -> ~AsyncBarrierWork -> ~AsyncAllreduceWork
                     -> ~AsyncWork -> at::ThreadLocalState::~ThreadLocalState
                     -> SafePyObject -> ConcretePyInterpreterVTable::decref -> take_gil

Nothing of mldbg is in the two stacks: a script without mldbg that frees its DDP model so is
exposed the same. The process group's own Python object is freed the safe way:
its pybind11 holder (`IntrusivePtrNoGilDestructor`) releases the GIL before the C++ destructor
runs, so a worker thread can take the GIL, finish, and be joined. So for a DDP model the hook
records, `outlive_reducer` keeps that Python object until the Reducer is gone: the Reducer then
never drops the last reference, and the group ends from its Python object, GIL released.
Not covered: a DDP model the hook was not given that shares the group and is freed last, and
a model kept to the end at module level (freed, if at all, in interpreter finalization: see the
end of tests/frameworks/ddp_script.py).
"""

from __future__ import annotations

import weakref

from torch import nn


def outlive_reducer(ddp: nn.Module) -> None:
    """Keep `ddp`'s process group (its Python object) alive until `ddp.reducer` is freed, so
    that the group is destroyed from that object, with the GIL released, never from the
    Reducer's destructor, which holds it. Changes no lifetime but the order of the last two
    releases; a model without a reducer or a group (not a DDP model) is left as it is."""
    reducer, group = getattr(ddp, "reducer", None), getattr(ddp, "process_group", None)
    if reducer is None or group is None:
        return
    try:
        # pybind11 calls a weak reference's callback after the C++ destructor of the object,
        # and the finalizer drops `group` after its callback: after ~Reducer, then
        weakref.finalize(reducer, _release, group)
    except TypeError:  # not weakly referenceable: nothing to do
        return


def _release(group: object) -> None:
    """The finalizer's call: its reference to `group` goes when it returns."""
