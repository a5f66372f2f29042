"""Language-model statistics of the captured loss (`torch_loss`): a few counts per statistics
step that the rules `labels_not_shifted`, `labels_shifted_twice`, `missing_causal_mask`,
`padding_in_loss` and `softmax_before_cross_entropy` read.

Where they come from: the loss's autograd graph. A cross-entropy (`F.cross_entropy`,
`nn.CrossEntropyLoss`, `F.nll_loss`, Hugging Face's `ForCausalLMLoss`) ends in an
`NllLossBackward0` node that saved its log-probabilities (N, V) and its targets (N) and knows
its `ignore_index`; the node is found from the loss through scalings, sums (label smoothing,
auxiliary losses) and shape-only nodes. The node before it says what fed the cross-entropy: a
`SoftmaxBackward0` before its `LogSoftmaxBackward0` (or straight into `nll_loss`) means the
logits were already probabilities. With the registered model's input ids (its first integer
(batch, time) argument, or `input_ids=`), the targets are laid out as the ids (N = B x T; or
B x (T - 1), Hugging Face's older cut, padded back with ignored targets).

A cross-entropy written in plain torch ops (`-log_softmax(x).gather(1, y).mean()`, `-(log_softmax(x)
* one_hot).sum(1).mean()`: `written_cross_entropy`) is read from the gather's or the product's
saved tensors (`written_node`), its targets ignored at -1, without the padding counts (its
per-target terms are reduced by the script), and not below a product by a tensor of several
values (a mask, a policy gradient's advantages: `weighs`).

A loss computed inside a `torch.compile`d model (nanoGPT's `compile = True`) shows no
cross-entropy node: its graph is one compiled node. When the model returned the loss with its
logits (B, T, V) and was called with targets (`labels=`, `targets=`, or an integer argument
after the ids, shaped as them), the counts come from those (`returned_statistics`): the layout
whose mean cross-entropy equals the returned loss (the targets at their positions, as nanoGPT
computes it, or shifted by one against the logits, as a Hugging Face model shifts `labels=`)
is the one counted; none (every count 0) when both or neither match. The probabilities'
counts are of the returned logits; the causal probe needs the graph and does not run there.

Each value is a count or a sum, a 0-d float32 tensor computed where the loss lives, with no
wait for the device (no `.item()`, no data-dependent shape); the hook hands them to its
statistics batch as records `lm/<key>` with the statistic `sum`. Offsets are counted along
both axes of the ids: axis 1 for batch-first ids (B, T), axis 0 for sequence-first ones
(T, B: PyTorch's word_language_model); offset 0 is the same for both.

| key | value |
| --- | --- |
| `align_0`, `eligible_0` | valid targets equal to the input id at the same position; valid targets |
| `align_<k>_<axis>`, `eligible_<k>_<axis>` | k = 1, 2: valid targets equal to the input id k positions later along `axis`; valid targets that have such a position |
| `last_loss_<axis>`, `last_<axis>` | summed loss of the valid targets at the last position along `axis`; their number |
| `rest_loss_<axis>`, `rest_<axis>` | the same over the other positions |
| `rows`, `valid` | sequences (rows of batch-first ids); valid targets (not `ignore_index`, not of a class weighted 0) |
| `pad_id`, `pad_rows`, `pad_trailing`, `pad_all`, `pad_loss`, `loss_sum` | the pad-like id p (the id that most often ends a row in a run of two or more valid targets that reaches as far as the longest row's: a row whose targets end before, its padding ignored, is not counted); rows ending in such a run of p; targets in those runs; valid targets equal to p anywhere; their summed loss; the summed loss of all valid targets. Not recorded for a loss with `reduction="none"`, whose per-target losses the script weighs itself (a padding mask) |
| `pad_weight` | with a class `weight=`: p's weight over the median class weight (DETR's "no object" class, weighted 0.1: the script weighs that class down itself) |
| `prob_rows`, `prob_total`, `prob_softmax` | of at most 64 evenly spaced rows of what fed the cross-entropy (the softmax before its log-softmax, else `nll_loss`'s input), those that are probabilities (in [0, 1], summing to 1 within 1e-3); the rows read; 1 when a softmax fed its log-softmax, 2 when a softmax fed `nll_loss` itself, else 0 |
| `leak_<axis>`, `own_<axis>`, `positions_<axis>` | the causal probe (a few statistics steps only, `Probe`): the squared norm of the gradient, with respect to the token embeddings at the last position along `axis`, of the log-likelihood of the valid targets at the other positions (0 exactly for a causal model, whatever its weights); the same squared norm summed over the other positions; their number |

The causal probe. Does the prediction at position t read the tokens after t? One backward pass
through the graph the step already built, from the summed log-likelihood S of the valid
targets off the last position (along both axes: the last row and the last column left out),
to the output of the token embedding (the `EmbeddingBackward0` nodes whose saved indices are the
model's ids or as many laid out as them; `torch.autograd.grad` to their `GradientEdge`s,
`retain_graph=True`). In a causal model no position before the last depends on the last token,
and the gradient there is exactly 0 (a masked attention weight is exactly 0, a unidirectional
RNN has no path); without the mask it is about as large as at any other position, from the
first step on. Where the tokens are looked up more than once (an autoencoder's encoder reads
the whole sentence by design, its decoder the same tokens shifted, with word dropout), the
least leaking lookup is counted: a causal decoder's leaks nothing, a model without the mask
leaks through every one. The pass reads
the graph and changes nothing: no parameter's `.grad` (the gradient stops at the embedding's
output), no module state, no forward, the RNG forked around it (a checkpointed segment that
recomputes), the user's backward then runs as before. It costs about one backward pass to the
embedding, at `Probe.FIRST` statistics steps and then every `Probe.EVERY`-th; not run in a
distributed job (its backward hooks would fire), nor where no embedding of the ids is in the graph.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.graph import GradientEdge

PREFIX = "lm/"  # the records: `lm/<key>`, statistic `sum`
NLL_NODES = frozenset({"NllLossBackward0", "NllLoss2DBackward0"})
# nodes a loss passes through on its way from the cross-entropy: scalings and sums
THROUGH = frozenset(
    {"MulBackward0", "MulBackward1", "DivBackward0", "DivBackward1", "AddBackward0", "SubBackward0",
     "MeanBackward0", "SumBackward0", "ToCopyBackward0", "ViewBackward0", "ReshapeAliasBackward0"}
)  # fmt: skip
# nodes that only move or copy values (logits.view(-1, V), .float(), [:, :-1], .contiguous())
_SHAPES = (
    "View", "UnsafeView", "ReshapeAlias", "Transpose", "Permute", "TBackward", "Clone", "ToCopy",
    "Slice", "Select", "Squeeze", "Unsqueeze", "Expand", "AsStrided", "Alias", "Index", "Unbind",
)  # fmt: skip
_JOINS = ("CatBackward", "StackBackward")  # nodes that join pieces (`_moving_past`)
DEPTH = 8  # nodes searched from the loss for the cross-entropy, and before it for a softmax
WIDTH = 8  # nodes of each depth searched from the loss (the terms of a sum)
_PROB_TOL = 1e-3
_PROB_ROWS = 64  # rows read for the probabilities check
AXES = (0, 1)
_PROBE_NODES = 20_000  # autograd nodes searched for the token embedding


class Probe:
    """When the causal probe runs: at the first `FIRST` TRAIN statistics steps where it could,
    then at every `EVERY`-th statistics step (a mask taken out later), a few backward passes
    per run."""

    FIRST = 3
    EVERY = 16

    def __init__(self) -> None:
        self.ran = 0  # probes run
        self.asked = 0  # statistics steps offered after the first probes

    def due(self) -> bool:
        if self.ran < self.FIRST:
            return True
        self.asked += 1
        return self.asked % self.EVERY == 0


def nll_node(loss: torch.Tensor) -> Any | None:
    """The cross-entropy's `NllLossBackward0` node behind `loss` (breadth first, a few nodes
    deep: `loss / n`, `loss * scale`, `(1 - e) * nll + e * smooth`, `lm + aux`), or None; None
    too when the loss sums several cross-entropies (multi-token prediction heads, multi-task
    heads): which targets go with which inputs is then not known."""
    found: list[Any] = []
    frontier = [loss.grad_fn]
    for _ in range(DEPTH):
        nxt: list[Any] = []
        for node in frontier:
            if node is None:
                continue
            name = node.name()
            if name in NLL_NODES:
                found.append(node)
            elif name in THROUGH:
                nxt.extend(f for f, _ in node.next_functions if f is not None)
        frontier = nxt[:WIDTH]
        if not frontier:
            break
    return found[0] if len(found) == 1 else None


# a cross-entropy written in plain torch ops, and the nodes a loss passes through to it
WRITTEN_THROUGH = THROUGH | {"NegBackward0", "SumBackward1", "MeanBackward1"}
_LOG_PROBABILITIES = "LogSoftmaxBackward0"
_COPIES = ("View", "UnsafeView", "ReshapeAlias", "Clone", "ToCopy")  # .float(), .view(N, C)
TARGET_TOLERANCE = 1e-3  # a target row sums to 1 within this


def written_cross_entropy(node: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(log-probabilities (N, C), class labels (N)) of a cross-entropy written in plain torch
    ops at the autograd `node`; None for any other node.

    Two forms are read, both from what autograd saved (no value of the user's is changed):
    - `logp * targets` (`-(logp * onehot).sum(1).mean()`, either order): a `MulBackward0` one of
      whose inputs is a `log_softmax` over the classes of (N, C) scores (through `.float()`,
      views) and the other a tensor without gradient of that shape, the targets. A row of
      targets names its class when it is a distribution with a majority class (>= 0, summing
      to 1, its largest entry above 1/2: one-hot, label smoothing, a mixup's major class; or
      such a row negated, `-target * logp`): the
      label is that class; any other row (a mask, soft targets without a majority, a weight)
      gets -1, which the class statistics leave out. Decided where the targets live, by
      `torch.where`: no wait for the device;
    - `logp.gather(1, y[:, None])` (`-logp.gather(1, y.unsqueeze(1)).mean()`): a `GatherBackward0`
      along the classes of a `log_softmax`'s (N, C) output, one index per row: y.
    A product of log-probabilities with anything else (a per-class weight vector, a scalar) is
    no cross-entropy: its other operand is not (N, C), or has a gradient."""
    name = node.name()
    if name == "GatherBackward0":
        try:
            dim, index = node._saved_dim, node._saved_index
        except (AttributeError, RuntimeError):
            return None
        logp = _log_probabilities(node.next_functions[0][0])
        if logp is None or _signed(int(dim)) % 2 != 1 or not isinstance(index, torch.Tensor):
            return None
        if index.dim() != 2 or index.shape != (logp.shape[0], 1):
            return None
        return logp, index[:, 0]
    if name != "MulBackward0":
        return None
    nexts = [f for f, _ in node.next_functions]
    if len(nexts) != 2 or (nexts[0] is None) == (nexts[1] is None):
        return None  # both operands with a gradient, or neither
    graded = 0 if nexts[0] is not None else 1
    logp = _log_probabilities(nexts[graded])
    if logp is None:
        return None
    try:
        targets = node._saved_other if graded == 0 else node._saved_self
    except (AttributeError, RuntimeError):
        return None
    if (
        not isinstance(targets, torch.Tensor)
        or targets.shape != logp.shape
        or not targets.is_floating_point()
    ):
        return None
    with torch.no_grad():
        t = targets.detach().float()
        t = torch.where(t.sum(1, keepdim=True) < 0, -t, t)  # `-target * logp`: the target negated
        top, label = t.max(1)
        valid = (t.min(1).values >= 0) & ((t.sum(1) - 1).abs() <= TARGET_TOLERANCE) & (top > 0.5)
        return logp, torch.where(valid, label, -1)


def _log_probabilities(node: Any) -> torch.Tensor | None:
    """The (N, C) output of a `log_softmax` over the classes (dim 1) behind `node`, through
    copies and views; else None."""
    for _ in range(DEPTH):
        if node is None:
            return None
        name = node.name()
        if name == _LOG_PROBABILITIES:
            try:
                result, dim = node._saved_result, node._saved_dim
            except (AttributeError, RuntimeError):
                return None
            if not isinstance(result, torch.Tensor) or result.dim() != 2 or result.shape[1] < 2:
                return None
            return result if _signed(int(dim)) % 2 == 1 else None
        if not name.startswith(_COPIES):
            return None
        nexts = [f for f, _ in node.next_functions if f is not None]
        if len(nexts) != 1:
            return None
        node = nexts[0]
    return None


def written_node(loss: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor] | None:
    """(its autograd node, the log-probabilities, the labels) of the one cross-entropy written in
    plain torch ops behind `loss` (`written_cross_entropy`), found as `nll_node` finds a
    cross-entropy (through scalings, sums, negations); None when there is none, several, or a
    cross-entropy node among them."""
    found: list[tuple[Any, torch.Tensor, torch.Tensor]] = []
    frontier = [loss.grad_fn]
    seen: set[int] = set()
    for _ in range(DEPTH):
        nxt: list[Any] = []
        for node in frontier:
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            name = node.name()
            if name in NLL_NODES:
                return None
            written = written_cross_entropy(node)
            if written is not None:
                found.append((node, *written))
            elif name in WRITTEN_THROUGH and not weighs(node):
                nxt.extend(f for f, _ in node.next_functions if f is not None)
        frontier = nxt[:WIDTH]
        if not frontier:
            break
    return found[0] if len(found) == 1 else None


def weighs(node: Any) -> bool:
    """Does the product or quotient `node` weigh a term by a tensor of several values (a
    per-sample weight, a mask, a policy gradient's advantages)? Below such a node a gather of
    log-probabilities is no cross-entropy of labels (`-(logp.gather(1, actions) * adv).mean()`
    gathers the actions an agent took): the written forms are not read there."""
    name = node.name()
    if name not in ("MulBackward0", "DivBackward0"):
        return False
    nexts = [f for f, _ in node.next_functions]
    if len(nexts) != 2:
        return False
    try:
        if name == "DivBackward0":
            other = node._saved_other  # the divisor
        elif (nexts[0] is None) == (nexts[1] is None):
            return nexts[0] is not None  # two graded factors: a product of terms
        else:
            other = node._saved_other if nexts[0] is not None else node._saved_self
    except (AttributeError, RuntimeError):
        return True  # unknown: not read
    return isinstance(other, torch.Tensor) and other.numel() > 1


def _before(node: Any) -> Any | None:
    """The first node before `node` that does more than move values (`_moving_past`); None
    for a leaf, or a node of several inputs."""
    nexts = [f for f, _ in node.next_functions if f is not None]
    return _moving_past(nexts[0], DEPTH) if len(nexts) == 1 else None


def _moving_past(node: Any, depth: int) -> Any | None:
    """`node`, or the first node before it that does more than move values (None: a leaf, a
    node with several inputs among the shape-only ones, or `depth` nodes passed). A
    concatenation or stack is passed through when every piece (the first `WIDTH`) comes from
    the same kind of node, the first piece's taken: the outputs of a model's stages, each a
    softmax, stacked and given to the loss one by one."""
    for left in range(depth, 0, -1):
        name = node.name()
        if name.startswith(_JOINS):
            pieces = [_moving_past(f, left - 1) for f, _ in node.next_functions[:WIDTH] if f is not None]
            kinds = {p.name() if p is not None else None for p in pieces}
            return pieces[0] if pieces and len(kinds) == 1 and None not in kinds else None
        if not name.startswith(_SHAPES):
            return node
        nexts = [f for f, _ in node.next_functions if f is not None]
        if len(nexts) != 1:
            return None
        node = nexts[0]
    return None


def fed_probabilities(node: Any) -> tuple[torch.Tensor, int, bool] | None:
    """(the softmax's output, its dim, whether a log-softmax came between) when a softmax fed
    the cross-entropy of `node`: softmax -> log_softmax -> nll (`F.cross_entropy(F.softmax(x))`),
    or softmax -> nll (`F.nll_loss(F.softmax(x))`). A log-softmax applied twice, or
    log(softmax), is fine."""
    before = _before(node)
    logs = before is not None and before.name() == "LogSoftmaxBackward0"
    if logs:
        before = _before(before)
    if before is None or before.name() != "SoftmaxBackward0":
        return None
    try:
        probs, dim = before._saved_result, before._saved_dim
    except (AttributeError, RuntimeError):  # freed by a backward already run
        return None
    if not isinstance(probs, torch.Tensor) or probs.dim() == 0:
        return None
    return probs, _signed(int(dim)) % probs.dim(), logs


def _signed(value: int) -> int:
    """A negative int64 that autograd hands back as unsigned (dim=-1, ignore_index=-100)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def token_ids(args: tuple[Any, ...], kwargs: dict[str, Any], model: Any = None) -> torch.Tensor | None:
    """A model call's token ids: `input_ids=`, else its first integer 2-D argument. None for
    an encoder-decoder (a Hugging Face `is_encoder_decoder` config, or `decoder_input_ids=`):
    its targets follow the decoder's tokens, not the encoder's `input_ids` (a denoising
    model's labels are close copies of its inputs, and rightly so). None too for a call whose
    first argument is floating and whose integer sequences come after it (`model(x, targets)`:
    an encoder's features, an image, numbers to sort, then the targets a decoder is fed under
    teacher forcing, which it shifts itself, as a pointer network does): an encoder-decoder
    of the script's own making."""
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False) is True or kwargs.get("decoder_input_ids") is not None:
        return None
    found = kwargs.get("input_ids")
    if _ids(found):
        return found
    for i, a in enumerate(args):
        if _ids(a):
            first = args[0]
            if i and isinstance(first, torch.Tensor) and (first.is_floating_point() or first.is_complex()):
                return None
            return a
    return None


def _ids(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.dim() == 2
        and not value.is_floating_point()
        and not value.is_complex()
        and value.dtype != torch.bool
    )


def statistics(
    loss: torch.Tensor, ids: torch.Tensor | None, probe: Probe | None = None
) -> dict[str, torch.Tensor] | None:
    """The counts of the module docstring for `loss` (and the ids of its model call), or
    None when no cross-entropy is behind it (or its saved tensors are gone); with `probe`
    (TRAIN steps), the causal probe's where it is due."""
    node = nll_node(loss)
    if node is None:  # a cross-entropy written in plain torch ops, perhaps
        written = written_node(loss)
        if written is None:
            return None
        # per-target terms the script reduces itself (perhaps weighed by a padding mask, which
        # the graph does not show as such): no padding counts, as for reduction="none"
        node, logp, target = written
        ignore, weight, reduction = -1, None, 0
    else:
        try:
            logp, target = node._saved_self, node._saved_target
            ignore = _signed(int(node._saved_ignore_index))
            weight, reduction = node._saved_weight, int(node._saved_reduction)
        except (AttributeError, RuntimeError):
            return None
    if not (isinstance(logp, torch.Tensor) and isinstance(target, torch.Tensor)) or logp.dim() < 2:
        return None
    if target.is_floating_point():  # class probabilities as targets (soft labels): not token ids
        return None
    with torch.no_grad():
        out = _probabilities(node, logp)
        found = counts(logp, target, ids, ignore, weight, reduction)
        if found is None:
            return out
        out.update(found[0])
    valid, x, flat_target = found[1], ids, target.reshape(-1)
    if "align_0" in out and x is not None and probe is not None and probe.due():
        found_probe = causal_probe(node, logp, flat_target, valid, x, ignore)
        if found_probe:
            probe.ran += 1
            out.update(found_probe)
    return out


def counts(
    logp: torch.Tensor,
    target: torch.Tensor,
    ids: torch.Tensor | None,
    ignore: int,
    weight: Any = None,
    reduction: int = 1,
) -> tuple[dict[str, torch.Tensor], torch.Tensor] | None:
    """The counts of the module docstring but the probabilities' and the probe's, from a
    cross-entropy's log-probabilities (N, V, ...) and targets, and the valid targets laid out
    as the ids; None when the targets are no sequence."""
    v = logp.shape[1]
    flat_logp = logp.movedim(1, -1).reshape(-1, v) if logp.dim() > 2 else logp
    flat_target = target.reshape(-1)
    if flat_target.numel() != flat_logp.shape[0] or flat_target.numel() == 0:
        return None
    seq = [d for d in target.shape[1:] if d != 1]
    shaped = target.reshape(target.shape[0], -1) if logp.dim() > 2 and len(seq) == 1 else None
    layout = _layout(flat_target, ids, shaped, ignore)
    if layout is None:
        return None
    tgt, x = layout
    valid = tgt != ignore
    if isinstance(weight, torch.Tensor) and weight.numel() == v:  # a class weight of 0 ignores too
        valid = valid & (
            weight.gather(0, torch.where(valid & (tgt >= 0) & (tgt < v), tgt, 0).reshape(-1)) > 0
        ).reshape(tgt.shape)
    nll = _token_loss(flat_logp, flat_target, ignore, v).reshape(tgt.shape[0], -1)
    if nll.shape[1] != tgt.shape[1]:  # the older cut, padded back
        nll = torch.cat([nll, torch.zeros_like(nll[:, :1])], 1)
    out = _losses(nll, valid)
    if reduction != 0:  # with reduction="none" the script weighs each target itself (a mask): unknown
        padding = _padding(tgt, valid, nll, v)
        if isinstance(weight, torch.Tensor) and weight.numel() == v:  # the pad-like id's class weight
            w = weight.detach().float()
            at = padding["pad_id"].long().clamp(0, v - 1).reshape(1)
            padding["pad_weight"] = w.gather(0, at).reshape(()) / w.median().clamp_min(1e-30)
        out.update(padding)
    if x is not None:
        out.update(_alignment(tgt, valid, x))
    return out, valid


IGNORED = -100  # a returned loss's ignored targets: any negative one (nanoGPT's -1, Hugging Face's -100)
MATCH = 1e-4  # relative: a candidate cross-entropy within this of the returned loss is the one computed


def targets_of(
    args: tuple[Any, ...], kwargs: dict[str, Any], ids: torch.Tensor | None
) -> torch.Tensor | None:
    """The targets a model call hands its own loss: `labels=` or `targets=`, else a second
    integer argument shaped as the ids (nanoGPT's `model(x, y)`)."""
    if ids is None:
        return None
    for key in ("labels", "targets"):
        found = kwargs.get(key)
        if isinstance(found, torch.Tensor) and _ids(found) and found.shape == ids.shape:
            return found
    at = next((i for i, a in enumerate(args) if a is ids), -1)  # the ids' place (`model(x, x)` too)
    others = [a for a in args[at + 1 :] if isinstance(a, torch.Tensor) and _ids(a) and a.shape == ids.shape]
    return others[0] if len(others) == 1 else None


def logits_of(output: Any, ids: torch.Tensor) -> torch.Tensor | None:
    """The (B, T, V) logits in a model's output that holds its loss: `.logits`, `"logits"`,
    or a tuple's one floating tensor laid out as the ids."""
    found = getattr(output, "logits", None) if not isinstance(output, (tuple, list, dict)) else None
    if isinstance(output, dict) or (hasattr(output, "keys") and hasattr(output, "get")):
        found = output.get("logits")
    elif isinstance(output, (tuple, list)):
        shaped = [
            o for o in output if isinstance(o, torch.Tensor) and o.dim() == 3 and o.shape[:2] == ids.shape
        ]
        found = shaped[0] if len(shaped) == 1 else None
    if not (isinstance(found, torch.Tensor) and found.is_floating_point() and found.dim() == 3):
        return None
    return found if found.shape[:2] == ids.shape else None


def returned_statistics(
    loss: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor, ids: torch.Tensor
) -> dict[str, torch.Tensor] | None:
    """The counts of a loss a model computed inside where no cross-entropy node shows (a
    `torch.compile`d model: its graph is one compiled node), from its returned logits (B, T,
    V) and the targets of its call. Whether the model shifts them itself (Hugging Face's
    `labels=input_ids`) or they come shifted (nanoGPT's `y`) is read from the loss: the mean
    cross-entropy of each layout (targets at their positions; targets[:, 1:] against
    logits[:, :-1]) that equals the returned loss within `MATCH` is the one computed. Both or
    neither (an untrained model's near-uniform logits, label smoothing): every count 0, as no
    valid target. No wait for the device (the choice is a `torch.where`); the probabilities'
    counts and the causal probe need the graph: not here."""
    with torch.no_grad():
        logp = logits.detach().float().log_softmax(-1)
        tgt = torch.where(targets < 0, IGNORED, targets)
        layouts = ((logp, tgt), (logp[:, :-1], tgt[:, 1:]))
        found: list[tuple[dict[str, torch.Tensor], torch.Tensor]] = []
        for lp, t in layouts:
            v = lp.shape[-1]
            flat_logp, flat_t = lp.reshape(-1, v), t.reshape(-1)
            nll = _token_loss(flat_logp, flat_t, IGNORED, v)
            n = (flat_t != IGNORED).sum()
            mean = nll.sum() / n.clamp(min=1)
            value = loss.detach().float()
            match = ((mean - value).abs() <= MATCH * value.abs().clamp(min=1.0)) & (n > 0)
            got = counts(flat_logp, flat_t, ids, IGNORED)
            if got is None:
                return None
            found.append((got[0], match))
        (first, m0), (second, m1) = found
        zero = torch.zeros((), device=logp.device)
        keys = first.keys() & second.keys()
        out = {
            k: torch.where(m0 & ~m1, first[k], torch.where(m1 & ~m0, second[k], zero)) for k in sorted(keys)
        }
        # the returned logits given to the loss: probabilities already (a softmax before it)?
        out.update(probability_rows(logits, -1, 0))
        return out


def causal_probe(
    node: Any, logp: torch.Tensor, target: torch.Tensor, valid: torch.Tensor, ids: torch.Tensor, ignore: int
) -> dict[str, torch.Tensor]:
    """The `leak_<axis>`, `own_<axis>`, `positions_<axis>` of the module docstring (empty when
    the probe cannot run). `valid`: the targets laid out as `ids` (B, T) or (T, B)."""
    if not logp.requires_grad or logp.grad_fn is None or ids.dim() != 2 or max(ids.shape) < 2:
        return {}
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return {}
    found = _token_embeddings(node, ids)
    if not found:
        return {}
    n0, n1 = ids.shape
    keep = valid.clone()
    if n0 > 1:
        keep[-1, :] = False
    if n1 > 1:
        keep[:, -1] = False
    n, v = target.numel(), logp.shape[1]
    flat = keep.reshape(-1) if n == n0 * n1 else keep[:, : n1 - 1].reshape(-1)  # the older cut
    if flat.numel() != n:
        return {}
    flat_logp = logp.movedim(1, -1).reshape(-1, v) if logp.dim() > 2 else logp
    inside = (target >= 0) & (target < v) & (target != ignore) & flat
    devices = [logp.device] if logp.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            picked = flat_logp.gather(1, torch.where(inside, target, 0)[:, None])[:, 0]
            total = (picked.float() * inside.float()).sum()
            grads = torch.autograd.grad(
                total,
                inputs=[GradientEdge(embedding, 0) for embedding, _ in found],
                retain_graph=True,
                allow_unused=True,
            )
    except Exception:  # a graph the probe cannot run through (reentrant checkpointing, ...)
        return {}
    with torch.no_grad():
        energies = []  # per lookup that reaches the predictions: per position, laid out as the ids
        for grad, (_, transposed) in zip(grads, found, strict=True):
            if grad is None or grad.numel() % ids.numel():
                continue
            grad = grad.detach().float()
            grad = grad.reshape(n1, n0, -1).transpose(0, 1) if transposed else grad.reshape(n0, n1, -1)
            energies.append(grad.pow(2).sum(-1))
        out: dict[str, torch.Tensor] = {}
        if not energies:
            return out
        for axis, length in ((0, n0), (1, n1)):
            if length < 2:
                continue
            leaks, owns = [], []
            for energy in energies:
                other = (
                    energy.narrow(1 - axis, 0, energy.shape[1 - axis] - 1)
                    if ids.shape[1 - axis] > 1
                    else energy
                )
                leaks.append(other.select(axis, -1).sum())
                owns.append(other.narrow(axis, 0, length - 1).sum())
            leak, own = torch.stack(leaks), torch.stack(owns)
            at = (leak / own.clamp_min(torch.finfo(own.dtype).tiny)).argmin()  # the least leaking lookup
            out[f"leak_{axis}"], out[f"own_{axis}"] = leak[at], own[at]
            out[f"positions_{axis}"] = _number(length - 1, logp.device)
    return out


def _token_embeddings(node: Any, ids: torch.Tensor) -> list[tuple[Any, bool]]:
    """The `EmbeddingBackward0` nodes of the graph behind `node` that looked up `ids` or as
    many indices laid out as them (an encoder and a decoder reading one sequence: a
    Sentence-VAE's GRU encoder sees every token by design, its decoder reads the same tokens
    with word dropout), each with whether it saw them transposed (a sequence-first model that
    turns its (T, B) ids batch-first). The probe takes the least leaking: a model is causal
    when its predictions read the tokens causally through one of them (the decoder's); without
    a mask they leak through every one. Empty when there is none whose positions can be told
    apart from the ids' (a square copy)."""
    seen: set[Any] = set()
    todo = [node]
    found: list[tuple[Any, bool]] = []
    while todo and len(seen) < _PROBE_NODES:
        n = todo.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        if n.name() == "EmbeddingBackward0":
            try:
                indices = n._saved_indices
            except (AttributeError, RuntimeError):
                indices = None
            if isinstance(indices, torch.Tensor) and indices.numel() == ids.numel():
                view = indices.device == ids.device and indices.data_ptr() == ids.data_ptr()
                transposed = _transposed(indices, ids, view)
                if transposed is not None:
                    found.append((n, transposed))
        todo.extend(f for f, _ in n.next_functions)
    return found


def _transposed(indices: torch.Tensor, ids: torch.Tensor, view: bool) -> bool | None:
    """Are `indices` (the embedding's) `ids` transposed (True), as they are (False), or
    laid out otherwise (None)? A view is told by its strides; a copy by its shape, unless square."""
    if indices.dim() == 1:  # a flattened view of contiguous ids
        return False if view and ids.is_contiguous() and indices.stride() == (1,) else None
    if indices.dim() != 2:
        return None
    if view:
        if indices.shape == ids.shape and indices.stride() == ids.stride():
            return False
        if indices.shape == ids.shape[::-1] and indices.stride() == ids.stride()[::-1]:
            return True
        return None
    if ids.shape[0] == ids.shape[1]:
        return None
    return False if indices.shape == ids.shape else True if indices.shape == ids.shape[::-1] else None


def _probabilities(node: Any, logp: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows of what fed the cross-entropy that are probabilities: of the softmax before it,
    or of `nll_loss`'s own input (log-probabilities are <= 0 and never sum to 1). At most
    `_PROB_ROWS` evenly spaced rows are read."""
    fed = fed_probabilities(node)
    probs, dim = (fed[0], fed[1]) if fed is not None else (logp, 1)
    return probability_rows(probs, dim, 0 if fed is None else 1 if fed[2] else 2)


def probability_rows(probs: torch.Tensor, dim: int, softmax: int) -> dict[str, torch.Tensor]:
    """`prob_rows`, `prob_total` of `probs` along `dim` (`_probabilities`), `prob_softmax`."""
    rows = probs.detach().movedim(dim, -1).reshape(-1, probs.shape[dim])
    if rows.shape[0] > _PROB_ROWS:
        rows = rows[:: rows.shape[0] // _PROB_ROWS][:_PROB_ROWS]
    rows = rows.float()
    good = (rows.min(-1).values >= 0) & (rows.max(-1).values <= 1) & ((rows.sum(-1) - 1).abs() <= _PROB_TOL)
    return {
        "prob_rows": good.sum().float(),
        "prob_total": _number(rows.shape[0], probs.device),
        "prob_softmax": _number(softmax, probs.device),
    }


def _number(value: float, device: torch.device) -> torch.Tensor:
    """A constant on `device`, made there (a fill, not a copy from the host)."""
    return torch.full((), float(value), device=device)


def _layout(
    target: torch.Tensor, ids: torch.Tensor | None, shaped: torch.Tensor | None, ignore: int
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """(targets laid out as the ids, the ids) -- or (targets of a (B, V, T) loss, None) --
    or None when the targets are no sequence (a classifier's one label per sample)."""
    if ids is not None and ids.device == target.device:
        n, (b, t) = target.numel(), ids.shape
        if n == b * t:
            return target.reshape(b, t), ids
        if t > 1 and n == b * (t - 1):  # Hugging Face's older cut: labels[..., 1:], logits[..., :-1, :]
            tgt = torch.cat([target.reshape(b, t - 1), torch.full_like(target[:b, None], ignore)], 1)
            return tgt, ids
    if shaped is not None:  # (B, V, T) logits: (B, T) targets
        return shaped, None
    return None


def _token_loss(logp: torch.Tensor, target: torch.Tensor, ignore: int, v: int) -> torch.Tensor:
    """-log p(target) per target (0 where ignored or out of range)."""
    inside = (target >= 0) & (target < v) & (target != ignore)
    picked = logp.gather(1, torch.where(inside, target, 0)[:, None])[:, 0].float()
    return torch.where(inside, -picked, torch.zeros_like(picked))


def _losses(nll: torch.Tensor, valid: torch.Tensor) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    w = valid.float()
    for axis in AXES:
        last = nll.select(axis, -1), w.select(axis, -1)
        rest = nll.narrow(axis, 0, nll.shape[axis] - 1), w.narrow(axis, 0, nll.shape[axis] - 1)
        out[f"last_loss_{axis}"], out[f"last_{axis}"] = (last[0] * last[1]).sum(), last[1].sum()
        out[f"rest_loss_{axis}"], out[f"rest_{axis}"] = (rest[0] * rest[1]).sum(), rest[1].sum()
    return out


def _alignment(tgt: torch.Tensor, valid: torch.Tensor, x: torch.Tensor) -> dict[str, torch.Tensor]:
    out = {
        "align_0": ((tgt == x) & valid).sum().float(),
        "eligible_0": valid.sum().float(),
    }
    for axis in AXES:
        n = tgt.shape[axis]
        for k in (1, 2):
            if n <= k:
                zero = _number(0, tgt.device)
                out[f"align_{k}_{axis}"] = out[f"eligible_{k}_{axis}"] = zero
                continue
            t, ok, later = tgt.narrow(axis, 0, n - k), valid.narrow(axis, 0, n - k), x.narrow(axis, k, n - k)
            out[f"align_{k}_{axis}"] = ((t == later) & ok).sum().float()
            out[f"eligible_{k}_{axis}"] = ok.sum().float()
    return out


def _padding(tgt: torch.Tensor, valid: torch.Tensor, nll: torch.Tensor, v: int) -> dict[str, torch.Tensor]:
    """The pad-like id of batch-first targets (B, T): the id that most often ends a row
    in a run of two or more that reaches as far as the longest row's targets (padding kept in
    the labels fills every row to the end, but for the ignored tail all rows share: a shift's).
    A row whose targets end before that ignores its padding: a run of one class there is
    the row's content (a form's footer words, all "O", before `[SEP]` and the padding a
    tagger ignores)."""
    b, t = tgt.shape
    pos = torch.arange(t, device=tgt.device)
    last = torch.where(valid, pos, -1).max(1).values  # each row's last valid target (-1: none)
    has = (last >= 0) & (last == last.max())  # as far as the longest row's (past the shared tail)
    end = tgt.gather(1, last.clamp(min=0)[:, None])  # (B, 1)
    after = pos[None, :] > last[:, None]
    same = (tgt == end) & valid
    run = torch.flip(same | after, [1]).long().cumprod(1).sum(1) - (t - 1 - last)  # the trailing run
    run = torch.where(has, run, 0)
    padded = run >= 2
    inside = (end[:, 0] >= 0) & (end[:, 0] < v)
    counts = torch.zeros(v + 1, device=tgt.device)
    counts.scatter_add_(0, torch.where(inside & padded, end[:, 0], v), padded.float())
    p = counts[:v].argmax()
    ends_p = padded & (end[:, 0] == p) & inside
    is_p = (tgt == p) & valid & (counts[:v].max() > 0)
    w = valid.float()
    return {
        "rows": _number(b, tgt.device),
        "valid": w.sum(),
        "pad_id": p.float(),
        "pad_rows": ends_p.float().sum(),
        "pad_trailing": torch.where(ends_p, run, 0).float().sum(),
        "pad_all": is_p.float().sum(),
        "pad_loss": (nll * is_p.float()).sum(),
        "loss_sum": (nll * w).sum(),
    }
