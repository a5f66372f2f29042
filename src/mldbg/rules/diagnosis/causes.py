"""The catalogue of causes: what each built-in rule's findings are evidence for.

A `Cause` names a root cause (`learning_rate_too_high`), says what it is and why it shows as it
does, gives the one advice that fits all of its evidence, and lists the rules whose findings are
its direct evidence and the rules whose findings it explains as symptoms. `CAUSES` is ordered by
precedence, most fundamental first: when a cause earlier in the list is present, the symptoms
it explains join it, whatever else they could also mean (a ReLU that died because the learning
rate is far too high is not a second problem with its own advice).

The catalogue keys on rule names and on facts of the run (`facts.RunFacts`), never on the
wording of a finding's message, which its rule may change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mldbg.rules.base import Finding
from mldbg.rules.diagnosis.facts import Fact, RunFacts

# the directions an advice can take; two causes whose advice takes opposite directions never
# stand side by side in one run (`diagnose` merges the later into the earlier)
LOWER_LR, RAISE_LR = "lower the learning rate", "raise the learning rate"
STOP_EARLIER, TRAIN_LONGER = "stop earlier", "train longer"
LESS_CAPACITY, MORE_CAPACITY = "a smaller or more regularized model", "a bigger or less regularized model"
OPPOSITE = {
    LOWER_LR: RAISE_LR, RAISE_LR: LOWER_LR,
    STOP_EARLIER: TRAIN_LONGER, TRAIN_LONGER: STOP_EARLIER,
    LESS_CAPACITY: MORE_CAPACITY, MORE_CAPACITY: LESS_CAPACITY,
}  # fmt: skip

#: how often a finding of a rule means a real defect (0-1): the weight of its evidence. A rule
#: not listed counts `DEFAULT_RELIABILITY`. Below `diagnosis.REPORT_CONFIDENCE` (0.65) a rule's
#: lone finding is a suspicion, not an alert: the rules whose lone findings were wrong more
#: often than right on the first looks at issue 26's blind sets (`poor_weight_initialization`:
#: 11 healthy runs alarmed alone, no buggy run caught alone; `nlp_sequence_ratio`: 3 and 0;
#: `loss_spike`: 1 and 2, each of the 2 with facts of the run that corroborate it: a loss that
#: jumped at its start), and those whose findings are weaker forms of another rule's
#: (`underfitting` of `loss_not_decreasing`, `gradient_norm_spike` of `loss_spike`,
#: `tensor_variance` of `exploding_tensor`). A rule whose bug those sets did not inject
#: (`overfit`, `frozen_layer_updated`, the XGBoost and profiler rules) is not judged by them:
#: it reports alone.
RELIABILITY: dict[str, float] = {
    "exploding_tensor": 0.95, "loss_divergence": 0.9, "batch_dim_mismatch": 0.9,
    "rank_divergence": 0.9, "gradient_not_reset": 0.85, "unchanged_tensor": 0.85,
    "train_in_eval_mode": 0.85, "dead_relu": 0.8, "not_normalized_data": 0.8,
    "check_input_images": 0.8, "loss_scale_collapse": 0.8, "nondeterministic_eval": 0.8,
    "loss_not_decreasing": 0.75, "tanh_saturation": 0.75, "sigmoid_saturation": 0.75,
    "saturated_activation": 0.75, "duplicate_batches": 0.75, "vanishing_gradient": 0.7,
    "weight_update_ratio": 0.7, "class_imbalance": 0.7, "train_eval_discrepancy": 0.7,
    "router_collapse": 0.7, "all_zero": 0.65, "loss_change_point": 0.65, "logit_growth": 0.65,
    "label_confusion": 0.65, "train_label_noise": 0.75, "loss_at_base_rates": 0.75, "loss_at_class_prior": 0.75, "frozen_layer_updated": 0.65, "poor_weight_initialization": 0.6,
    "underfitting": 0.6, "loss_spike": 0.6, "tensor_variance": 0.6, "nlp_sequence_ratio": 0.6,
    "softmax_before_cross_entropy": 0.95, "labels_not_shifted": 0.9, "labels_shifted_twice": 0.9,
    "padding_in_loss": 0.8, "missing_causal_mask": 0.75,
    "gradient_norm_spike": 0.55, "overfit": 0.65, "overtraining": 0.4, "confusion": 0.35,
    "parameter_without_gradient": 0.85, "frozen_parameter_in_optimizer": 0.85,
}  # fmt: skip
DEFAULT_RELIABILITY = 0.65
SYMPTOM_WEIGHT = 0.3  # a finding a cause explains, not its own evidence, weighs this much of it
LARGE_UPDATE = 5.0  # a weight norm that changes this many times in one saved step: a large update

Predicate = Callable[[Finding, RunFacts], bool]
Signal = Callable[[RunFacts], list[Fact]]


@dataclass(frozen=True)
class Cause:
    """A root cause: its name, what it is, why it shows so, its one advice, its evidence.

    - `evidence`: rules whose findings are its direct evidence; `when` narrows a rule's findings
      to those a predicate over the finding and the run's facts accepts.
    - `explains`: rules whose findings it explains as symptoms once it is present.
    - `signal`: facts of the run that speak for it; with them it is present as soon as one
      finding it explains exists (a fact alone never makes a diagnosis).
    - `directions`: where its advice points (`LOWER_LR`...), to keep one run's advice free of
      contradictions; `directed_by`: the rules whose findings point it so (empty: any of its
      findings). A diagnosis whose findings point nowhere opposes nothing.
    """

    name: str
    title: str
    explanation: str
    advice: str
    evidence: tuple[str, ...] = ()
    explains: tuple[str, ...] = ()
    when: dict[str, Predicate] = field(default_factory=dict)
    signal: Signal | None = None
    directions: frozenset[str] = frozenset()
    directed_by: tuple[str, ...] = ()

    def directions_of(self, rules: set[str]) -> frozenset[str]:
        """Where its advice points for a diagnosis made of findings of `rules`."""
        return self.directions if not self.directed_by or rules & set(self.directed_by) else frozenset()

    def is_evidence(self, finding: Finding, facts: RunFacts) -> bool:
        if finding.rule not in self.evidence:
            return False
        test = self.when.get(finding.rule)
        return test is None or test(finding, facts)

    def claims(self, finding: Finding, facts: RunFacts) -> bool:
        return finding.rule in self.explains or self.is_evidence(finding, facts)

    def signals(self, facts: RunFacts) -> list[Fact]:
        return self.signal(facts) if self.signal is not None else []


# predicates and signals over the run's facts ------------------------------------------------
def _large_update(finding: Finding, facts: RunFacts) -> bool:
    g = facts.growth(finding.tensors, finding.step)
    return g is not None and g >= LARGE_UPDATE


def _small_update(finding: Finding, facts: RunFacts) -> bool:
    g = facts.growth(finding.tensors, finding.step)
    return g is not None and g < LARGE_UPDATE


def _weights_all_zero(finding: Finding, facts: RunFacts) -> bool:
    """all_zero on a parameter (not a gradient or an output): zero init, or a dead layer."""
    return any(t in facts.weights for t in finding.tensors)


def _saturating(finding: Finding, facts: RunFacts) -> bool:
    return facts.saturating


def _at_start(finding: Finding, facts: RunFacts) -> bool:
    """At the first saved training step: before any update, so not the learning rate's doing."""
    return facts.at_start(finding.step)


def _not_at_start(finding: Finding, facts: RunFacts) -> bool:
    return not facts.at_start(finding.step)


def _weights_move(finding: Finding, facts: RunFacts) -> bool:
    """Gradients that pile up move the weights more and more; weights that never moved
    (unknown counts as moved) mean the optimizer does not hold them (its zero_grad misses
    their .grad too)."""
    return facts.unmoved(finding.tensors, finding.step) is not True


def _weights_never_move(finding: Finding, facts: RunFacts) -> bool:
    return facts.unmoved(finding.tensors, finding.step) is True


def _died_in_training(finding: Finding, facts: RunFacts) -> bool:
    """ReLU units alive at the first saved step, dead later: updates killed them."""
    return not facts.at_start(finding.step) and facts.dead_at_start(finding.tensors) is False


def _dead_from_init(finding: Finding, facts: RunFacts) -> bool:
    """ReLU units dead at the first saved step, before any update: the init killed them."""
    return facts.dead_at_start(finding.tensors) is True


def _init_fault_at_start(finding: Finding, facts: RunFacts) -> bool:
    """poor_weight_initialization whose test also holds at the first step (or unknown)."""
    return facts.init_at_start() is not False


def _init_fault_after_updates(finding: Finding, facts: RunFacts) -> bool:
    """poor_weight_initialization whose test did not hold at the first step, before any
    update: the gains or gradients left their band after updates, too large ones."""
    return not facts.at_start(finding.step) and facts.init_at_start() is False


def _dead_init(facts: RunFacts) -> list[Fact]:
    return [facts.dead_init] if facts.dead_init is not None else []


def _learned_the_prior(facts: RunFacts) -> list[Fact]:
    return [facts.at_prior] if facts.at_prior is not None else []


def _steps_too_large(facts: RunFacts) -> list[Fact]:
    return [f for f in (facts.loss_jump, facts.loss_rise, facts.blowup) if f is not None]


# "the training is broken" symptoms: a broken training explains the loss not falling (to the
# class prior, too: a model that learns nothing predicts the class frequencies, whatever stopped
# it) and the evaluation going wrong with it
_NOT_LEARNING = ("loss_not_decreasing", "underfitting", "confusion", "overfit", "overtraining",
                 "label_confusion", "loss_at_class_prior")  # fmt: skip
_DEAD = ("all_zero", "vanishing_gradient", "weight_update_ratio", "unchanged_tensor",
         "frozen_layer_updated", "tensor_variance")  # fmt: skip
_SATURATED = ("tanh_saturation", "sigmoid_saturation", "saturated_activation")
_DIVERGING = ("loss_change_point", "loss_spike", "gradient_norm_spike", "logit_growth", "exploding_tensor",
              "loss_divergence")  # fmt: skip

#: the causes, most fundamental first (see the module doc)
CAUSES: tuple[Cause, ...] = (
    Cause(
        "mixed_precision_overflow",
        "mixed precision overflows at every step",
        "The AMP loss scale keeps falling: something overflows (inf/NaN) in every step, so the "
        "scaler skips every update and the model stops learning.",
        "Find what overflows in every step: a NaN-producing op (x / x.norm() on an all-zero row, "
        "log(0), sqrt(0)), a loss computed in fp16 (compute it in fp32 outside autocast), or an "
        "fp16 activation beyond 65504; use bf16, torch.nn.functional.normalize (it has an eps), and "
        "check for inf/NaN in the inputs.",
        evidence=("loss_scale_collapse",),
        explains=(
            "exploding_tensor",
            "gradient_norm_spike",
            "loss_spike",
            "unchanged_tensor",
            "weight_update_ratio",
            *_NOT_LEARNING,
        ),  # fmt: skip
    ),
    Cause(
        "numerical_instability",
        "a numerical operation turns values into NaN or inf before any update",
        "Non-finite values at the first training step, before the optimizer changed anything, "
        "cannot come from the learning rate: an operation of the forward or backward pass is "
        "undefined on its input (log(0), x / 0, sqrt of a negative number or its gradient at 0, "
        "exp of a large number), or the inputs hold NaN or inf.",
        "Find the first tensor that is not finite (torch.autograd.set_detect_anomaly(True) names "
        "the op) and make it safe: log(x + eps) or x.clamp_min(eps).log(), a Softplus instead of a "
        "ReLU where a rate must stay > 0, torch.log_softmax / F.cross_entropy instead of "
        "log(softmax(x)), eps in every division and sqrt; check the inputs for NaN/inf.",
        evidence=("exploding_tensor", "loss_divergence"),
        when={"exploding_tensor": _at_start, "loss_divergence": _at_start},
        explains=(
            *_DIVERGING,
            "unchanged_tensor",
            "weight_update_ratio",
            "all_zero",
            "vanishing_gradient",
            "tensor_variance",
            *_NOT_LEARNING,
        ),  # fmt: skip
    ),
    Cause(
        "gradients_accumulate",
        "gradients accumulate across optimizer steps (a missing zero_grad)",
        "Without optimizer.zero_grad() each step adds its gradient to all earlier ones: the update "
        "grows step after step, like a learning rate that keeps rising, until the loss climbs, "
        "units die and the training diverges.",
        "Call optimizer.zero_grad() (or model.zero_grad(set_to_none=True)) once per optimizer step, "
        "before loss.backward(); when accumulating on purpose, zero the gradients after each "
        "optimizer.step() and pass accumulation_steps to gradient_not_reset.",
        evidence=("gradient_not_reset",),
        when={"gradient_not_reset": _weights_move},
        explains=(*_DIVERGING, "dead_relu", *_DEAD, *_SATURATED, *_NOT_LEARNING),
    ),
    Cause(
        "learning_rate_too_high",
        "the learning rate is too high",
        "Steps far too large overshoot the minimum: the loss jumps up or turns NaN at the first "
        "updates, pre-activations are pushed below zero for good (dead ReLUs, zero outputs, "
        "vanishing gradients, tiny updates after that), layers look frozen and the init looks bad.",
        "Lower the learning rate (10x or more), add a learning-rate warm-up, and clip gradients "
        "(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)); if the loss still climbs from "
        "the first step, check that it is minimized (no flipped sign, not maximize=True).",
        evidence=(
            "loss_divergence",
            "exploding_tensor",
            "loss_change_point",
            "weight_update_ratio",
            "dead_relu",
            "poor_weight_initialization",
            "gradient_depth_collapse",  # a post-LN stack's first full-size steps, without warm-up
        ),
        when={
            "poor_weight_initialization": _init_fault_after_updates,
            "weight_update_ratio": _large_update,
            "exploding_tensor": _not_at_start,
            "loss_divergence": _not_at_start,
            "dead_relu": _died_in_training,
        },  # fmt: skip
        explains=(
            *_DIVERGING,
            "dead_relu",
            *_DEAD,
            *_SATURATED,
            "poor_weight_initialization",
            "train_eval_discrepancy",
            *_NOT_LEARNING,
        ),  # fmt: skip
        signal=_steps_too_large,
        directions=frozenset({LOWER_LR}),
    ),
    Cause(
        "data_not_normalized",
        "the inputs are not normalized",
        "Inputs far from zero mean and unit variance push pre-activations into the flat ends of "
        "sigmoid/tanh, make the layers' activation scales differ and slow or stall learning.",
        "Standardize the inputs with statistics of the training set: x = (x - mean) / std per "
        "feature (sklearn.preprocessing.StandardScaler, or torchvision.transforms.Normalize(mean, std) "
        "per channel for images; divide raw pixels by 255 first).",
        evidence=("not_normalized_data", "check_input_images"),
        explains=(
            *_SATURATED,
            "poor_weight_initialization",
            "vanishing_gradient",
            "weight_update_ratio",
            "tensor_variance",
            *_NOT_LEARNING,
        ),  # fmt: skip
    ),
    Cause(
        "vanishing_gradients",
        "gradients vanish through saturating activations",
        "Each sigmoid/tanh layer multiplies the gradient by at most 0.25 (sigmoid) or 1 (tanh, only "
        "near 0): in a deep stack the layers near the input get almost no gradient and stop learning.",
        "Use ReLU-family activations (ReLU, LeakyReLU, GELU) instead of sigmoid/tanh in deep stacks, "
        "add BatchNorm/LayerNorm or residual connections, and use a variance-preserving init "
        "(torch.nn.init.xavier_uniform_ for tanh/sigmoid, kaiming_normal_ for ReLU).",
        evidence=("vanishing_gradient",),
        when={"vanishing_gradient": _saturating},
        explains=(
            "poor_weight_initialization",
            "weight_update_ratio",
            "unchanged_tensor",
            "tensor_variance",
            *_SATURATED,
            *_NOT_LEARNING,
        ),  # fmt: skip
    ),
    Cause(
        "bad_initialization",
        "the weights are badly initialized",
        "Zero, constant, tiny or huge initial weights (or biases that silence a layer) break "
        "training from the first step: neurons stay copies of each other, activations saturate or "
        "die, gradients vanish or explode.",
        "Re-initialize with a variance-preserving random init: torch.nn.init.kaiming_normal_ for "
        "ReLU, xavier_uniform_ for tanh/sigmoid; never all zeros or one constant for weights, keep "
        "biases at 0 or small. Normalized inputs and BatchNorm/LayerNorm make training less "
        "sensitive to it.",
        evidence=("poor_weight_initialization", "all_zero", "dead_relu"),
        when={
            "all_zero": _weights_all_zero,
            "dead_relu": _dead_from_init,
            "poor_weight_initialization": _init_fault_at_start,
        },
        explains=("dead_relu", *_DEAD, *_SATURATED, *_NOT_LEARNING),
        signal=_dead_init,
    ),
    Cause(
        "dead_units",
        "ReLU units died",
        "Units whose pre-activation is below zero for every input output 0 and get no gradient: "
        "once dead they stay dead, and the layers after them see nothing (zero outputs, vanishing "
        "gradients, weights that no longer move).",
        "Initialize biases at 0 or slightly positive (not negative), use LeakyReLU/GELU instead of "
        "ReLU, add BatchNorm before the ReLU, check that the inputs are normalized, and if the units "
        "died after large updates, lower the learning rate.",
        evidence=("dead_relu",),
        explains=(*_DEAD, *_NOT_LEARNING),
        directions=frozenset({LOWER_LR}),
    ),
    Cause(
        "saturated_activations",
        "activations are saturated",
        "Pre-activations beyond the flat ends of sigmoid/tanh pass almost no gradient: the layer "
        "stops learning.",
        "Normalize the inputs (zero mean, unit variance), use a smaller init (xavier_uniform_ for "
        "tanh/sigmoid), add BatchNorm/LayerNorm before the activation, or switch hidden layers to "
        "ReLU-family activations.",
        evidence=_SATURATED,
        explains=("poor_weight_initialization", "vanishing_gradient", "weight_update_ratio", *_NOT_LEARNING),
    ),
    Cause(
        "parameters_not_updated",
        "the optimizer does not move the weights",
        "Weights that do not change although gradients reach them: the optimizer does not step, "
        "does not hold them (built before the layer was replaced or moved; then its zero_grad "
        "does not reach their .grad either, which piles up step after step), or its learning rate "
        "is 0 or orders of magnitude too small.",
        "Check that optimizer.step() runs every step, that the optimizer was built with "
        "model.parameters() after the model is final (layers replaced, moved to the device), and "
        "that the learning rate is not 0 or orders of magnitude too small (raise it if so), and that the "
        "layers meant to train have requires_grad True.",
        evidence=(
            "unchanged_tensor",
            "weight_update_ratio",
            "gradient_not_reset",
            "frozen_parameter_in_optimizer",
        ),
        when={"weight_update_ratio": _small_update, "gradient_not_reset": _weights_never_move},
        explains=("vanishing_gradient", "tensor_variance", *_NOT_LEARNING),
        directions=frozenset({RAISE_LR}),
        # weights frozen by mistake say nothing of the learning rate: only weights that stay
        # put while they train point to raising it
        directed_by=("unchanged_tensor", "weight_update_ratio", "gradient_not_reset"),
    ),
    Cause(
        "gradients_interrupted",
        "gradients do not reach part of the model",
        "A tensor that is all zeros, or a gradient that vanishes, in a model whose activations do "
        "not explain it: the tensor may be detached from the loss or computed under no_grad.",
        "Check that the tensor is connected to the loss (no .detach(), torch.no_grad() or "
        ".item() in the training forward), that its layer is used, and initialize weights randomly.",
        evidence=("parameter_without_gradient",),
        explains=("weight_update_ratio", "unchanged_tensor", "tensor_variance", *_NOT_LEARNING),
    ),
    Cause(
        "softmax_before_cross_entropy",
        "the cross-entropy is given probabilities, not logits",
        "A softmax before nn.CrossEntropyLoss / F.cross_entropy (which applies its own log-softmax), "
        "or probabilities given to F.nll_loss: the loss sees values in [0, 1], cannot fall below "
        "log(1 + (V - 1) / e) and its gradients shrink, so the model learns slowly, then stalls.",
        "Give the loss raw logits: remove the softmax before CrossEntropyLoss (or use F.log_softmax "
        "with F.nll_loss), and apply softmax only to read probabilities at inference.",
        evidence=("softmax_before_cross_entropy",),
        explains=("vanishing_gradient", *_NOT_LEARNING),
    ),
    Cause(
        "lm_labels_misaligned",
        "the language model's labels are not shifted by one token",
        "A causal language model predicts token t+1 from tokens up to t: labels not shifted make it "
        "copy its input (the loss falls to ~0 and nothing is learnt), labels shifted twice make it "
        "predict the token after next (the loss stays high).",
        "Shift the labels exactly once: y = x[:, 1:] against logits[:, :-1] (or x = data[i:i+T], "
        "y = data[i+1:i+T+1]); Hugging Face models shift labels= themselves, so pass "
        "labels=input_ids unshifted there.",
        evidence=("labels_not_shifted", "labels_shifted_twice"),
        explains=("overfit", "overtraining", "loss_not_decreasing", "underfitting"),
    ),
    Cause(
        "missing_causal_mask",
        "the language model sees the tokens it predicts (no causal mask)",
        "A decoder's self-attention without its causal mask (or a bidirectional RNN) lets each "
        "position read the next token, its own target: the training loss falls towards 0 while "
        "generation, which has no future to read, fails.",
        "Mask the future in every decoder self-attention: mask=nn.Transformer."
        "generate_square_subsequent_mask(T) with is_causal=True, or F.scaled_dot_product_attention("
        "..., is_causal=True); use a unidirectional RNN for a language model.",
        evidence=("missing_causal_mask",),
        explains=("overfit", "overtraining"),
    ),
    Cause(
        "padding_in_loss",
        "padding tokens are in the loss",
        "Padded positions of the labels carry the pad token instead of the loss's ignore_index: a "
        "share of the loss and of the gradient goes to predicting padding after padding, the loss "
        "looks better than the model is and the model learns to end texts with padding.",
        "Set the labels at padded positions to -100 (the ignore_index of CrossEntropyLoss): "
        "labels[attention_mask == 0] = -100, or a collator that does it "
        "(DataCollatorForLanguageModeling(mlm=False)); when the pad token is the EOS token, mask by "
        "the attention mask, not by the token id.",
        evidence=("padding_in_loss",),
        explains=("nlp_sequence_ratio",),
    ),
    Cause(
        "class_imbalance",
        "the classes are imbalanced",
        "Some classes are far rarer than others: the model learns to predict the common ones and "
        "ignores the rare, which then show as confused classes.",
        "Re-sample the classes (oversample the rare ones, e.g. torch.utils.data.WeightedRandomSampler), "
        "weight the loss by inverse class frequency (CrossEntropyLoss(weight=...)), or collect more "
        "data of the rare classes; judge the model with per-class recall or F1, not accuracy.",
        evidence=("class_imbalance",),
        explains=("label_confusion", "confusion"),
    ),
    Cause(
        "labels_misaligned",
        "the labels do not match the inputs",
        "Labels swapped between classes, shuffled against their inputs or mapped wrongly: the "
        "model learns them on the training set, fails on the validation set (overfit) and confuses "
        "particular classes.",
        "Audit the labels: sample training examples of the confused classes and look at them, check "
        "the label mapping (class ids swapped in part of the data) and that inputs and labels stay "
        "paired through shuffling and augmentation; fix or drop mislabelled examples (cleanlab "
        "finds them).",
        evidence=(
            "train_label_noise",
            "loss_at_base_rates",
            "loss_at_class_prior",
            "label_confusion",
            "confusion",
        ),
        explains=("overfit", "overtraining", "loss_not_decreasing", "underfitting"),
        signal=_learned_the_prior,
    ),
    Cause(
        "data_repeats",
        "the model trains on the same samples again and again",
        "Batches that repeat (one fixed batch, a sampler that does not move on, ranks reading the "
        "same shard) let the model memorize them: the training loss falls, the validation loss "
        "does not.",
        "Check the sampler and the data loader: draw a new batch at every step, give each rank and "
        "each data-loader worker its own part of the data (DistributedSampler, worker_init_fn), and "
        "use more training data.",
        evidence=("duplicate_batches",),
        explains=("overfit", "overtraining", "confusion"),
    ),
    Cause(
        "logits_grow",
        "the logits grow without bound",
        "Output or attention logits keep growing: a learned temperature or logit scale runs away, "
        "or the loss is pushed the wrong way.",
        "Clamp a learned temperature or logit scale (CLIP clamps it at 100), add weight decay or a "
        "z-loss on the logits, normalize queries and keys (QK-norm) or check the 1/sqrt(d) scale of "
        "attention, check that the loss is minimized, and lower the learning rate.",
        evidence=("logit_growth",),
        directions=frozenset({LOWER_LR}),
    ),
    Cause(
        "not_learning",
        "the model does not learn",
        "The training loss does not fall: the updates do not reach the weights, are too small, or "
        "the model cannot fit the data.",
        "Check that the optimizer steps and holds every parameter and that labels belong to their "
        "inputs; then train longer or raise the learning rate, and use a bigger model or less "
        "regularization.",
        explains=("confusion", "overfit", "overtraining"),
        directions=frozenset({RAISE_LR, TRAIN_LONGER, MORE_CAPACITY}),
    ),
    Cause(
        "overfitting",
        "the model overfits",
        "The training loss keeps falling while the validation loss stops or rises: the model "
        "memorizes the training set.",
        "Stop earlier (early stopping on the validation loss), get more training data or augment it, "
        "add regularization (weight decay, dropout), or use a smaller model.",
        evidence=("overfit", "overtraining"),
        directions=frozenset({STOP_EARLIER, LESS_CAPACITY}),
    ),
    Cause(
        "bad_batch",
        "a batch of extreme or corrupted samples",
        "One step's loss or gradient norm jumps far above its recent level: a batch of corrupted or "
        "extreme samples (or wrong labels) hit the model.",
        "Replay the batch of that step (look for corrupted or extreme samples and wrong labels), "
        "clip gradients (torch.nn.utils.clip_grad_norm_), and watch whether the loss recovers.",
        evidence=("loss_spike", "gradient_norm_spike"),
        explains=("logit_growth",),
    ),
)

#: a built-in rule's cause when no other present cause claims its finding (its "home"); a
#: rule not listed here, nor naming its own (`Rule.cause`), is its own cause (its name)
HOME: dict[str, str] = {
    "exploding_tensor": "learning_rate_too_high", "loss_divergence": "learning_rate_too_high",
    "loss_change_point": "learning_rate_too_high", "all_zero": "gradients_interrupted",
    "vanishing_gradient": "vanishing_gradients", "loss_not_decreasing": "not_learning",
    "underfitting": "not_learning", "poor_weight_initialization": "bad_initialization",
}  # fmt: skip

BY_NAME: dict[str, Cause] = {c.name: c for c in CAUSES}


#: a rule of the user's own (not built in): its finding is the user's own decision, taken as
#: sure as the surest built-in evidence (a custom rule with a stop action stops)
OWN_RULE_RELIABILITY = 0.95


def finding_reliability(finding: Finding) -> float:
    """How often a finding like `finding` means a real defect: its own `reliability` where its
    rule set one (the test that fired is surer or weaker than the rule's others), else its
    rule's."""
    return finding.reliability if finding.reliability is not None else reliability(finding.rule)


def reliability(rule: str) -> float:
    if rule in RELIABILITY:
        return RELIABILITY[rule]
    from mldbg.rules.registry import BUILTIN, load_builtin

    load_builtin()  # imported once; then a dictionary lookup
    return DEFAULT_RELIABILITY if rule in BUILTIN else OWN_RULE_RELIABILITY
