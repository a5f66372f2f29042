"""The torch function mode stack of a thread, as the hook's modes use it: the attention capture
of a statistics step (`torch_attention`) and an evaluation's loss window (`torch_eval_loss`) may
be entered and left in any order, with the user's own modes and each other's between them.
`TorchFunctionMode.__exit__` pops whatever mode is on top, so a mode is taken off where it sits:
a mode of ours left on the stack would see every later torch call of the process, and dynamo
would trace the user's compiled code under it."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode


def depth() -> int:
    """The number of torch function modes on this thread's stack."""
    return int(torch._C._len_torch_function_stack())


def take_off(mode: TorchFunctionMode) -> bool:
    """Take `mode` off this thread's stack wherever it sits (the modes above it stay above, in
    their order); False when it is not on the stack (nothing changes)."""
    above = []
    found = False
    while depth():
        top = torch.overrides._pop_mode()
        if top is mode:
            found = True
            break
        above.append(top)
    for m in reversed(above):
        torch.overrides._push_mode(m)
    return found


__all__ = ["depth", "take_off"]
