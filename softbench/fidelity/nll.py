"""The language-model head in FP32, per-block NLL and the vocabulary-output divergences against the baseline.

The model's decoder runs once per block and condition and returns the final hidden states (after the final
norm). The head is applied here, in chunks of positions, with FP32 weights and FP32 logits (paper A.2); a
model-defined final-logit softcap is kept. Vocabulary-output fidelity (paper C.4) compares the condition's
next-token distribution with the baseline's at every predicted position: forward KL(base || cond), reverse
KL(cond || base), Jensen-Shannon divergence (natural log) and top-1 agreement. Keeping the baseline's hidden
states (positions x hidden size) instead of its logits lets the condition recompute them chunk by chunk; on the
kernel path they are what the A0 process hands to the A1 process."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from softbench.core.errors import UnsupportedError

HEAD_CHUNK = 256


@dataclass(frozen=True)
class Divergences:
    """Sums over a block's predicted positions of the vocabulary-output comparison with the baseline: all four or
    none (a block scored without the baseline's hidden states has none)."""

    kl_forward_sum: float
    kl_reverse_sum: float
    jsd_sum: float
    top1_agree: int


@dataclass
class BlockScore:
    """Sums over a block's predicted positions; means are sum / n_tokens."""

    nll_sum: float
    n_tokens: int
    divergences: Divergences | None = None

    def to_row(self) -> dict:
        n = self.n_tokens
        row = {"nll": self.nll_sum / n, "n_tokens": n}
        d = self.divergences
        if d is not None:
            row.update(kl_forward=d.kl_forward_sum / n, kl_reverse=d.kl_reverse_sum / n, jsd=d.jsd_sum / n,
                       top1_agreement=d.top1_agree / n)
        return row


class FP32Head:
    def __init__(self, model):
        cfg = model.config
        for attr in ("logit_scale", "logits_scaling"):
            value = getattr(cfg, attr, None)
            if value not in (None, 1, 1.0):
                raise UnsupportedError(f"the model scales its logits ({attr}={value}); the FP32 head here does not")
        head = model.get_output_embeddings()
        self.weight = head.weight.detach().to(torch.float32)
        bias = getattr(head, "bias", None)
        self.bias = bias.detach().to(torch.float32) if bias is not None else None
        self.softcap = getattr(cfg, "final_logit_softcapping", None)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        # under a device map the final norm and the head may sit on different GPUs
        logits = torch.nn.functional.linear(hidden.to(self.weight.device, torch.float32), self.weight, self.bias)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return torch.log_softmax(logits, dim=-1)


def decoder_hidden(model, input_ids: torch.Tensor) -> torch.Tensor:
    """Final hidden states of one sequence, (seq, hidden): the decoder without the head, no KV cache."""
    base = getattr(model, model.base_model_prefix)
    out = base(input_ids=input_ids, use_cache=False)
    return out.last_hidden_state[0]


def native_loss(model, input_ids: torch.Tensor, restore: str) -> float:
    """The model's own loss with its own eager attention (which applies its own softcap and sliding windows)
    and its own head: the wiring check's reference, code that softbench did not write. `restore`: the
    attention implementation to put back."""
    model.set_attn_implementation("eager")
    try:
        return float(model(input_ids=input_ids, labels=input_ids, use_cache=False).loss)
    finally:
        model.set_attn_implementation(restore)


def _divergences(lb: torch.Tensor, lc: torch.Tensor) -> tuple[float, float, float]:
    """Sums over rows of KL(b||c), KL(c||b) and JSD(b, c) from log-probabilities, in float64 and through the
    log-ratio delta = lc - lb, so identical distributions give exactly 0 (conditions close to the baseline
    have divergences near 1e-8, where FP32 rounding of log m would dominate):
    log(m/pb) = log1p(expm1(delta)/2), log(m/pc) = log(m/pb) - delta."""
    delta = lc.double() - lb.double()
    pb, pc = lb.double().exp(), lc.double().exp()
    g = torch.log1p(torch.expm1(delta) * 0.5)
    kl_f = float((pb * -delta).sum())
    kl_r = float((pc * delta).sum())
    jsd = float((0.5 * (pb * -g + pc * (delta - g))).sum())
    return kl_f, kl_r, jsd


def score_block(head: FP32Head, hidden: torch.Tensor, targets: torch.Tensor,
                baseline_hidden: torch.Tensor | None = None, chunk: int = HEAD_CHUNK) -> BlockScore:
    """`hidden` (n, H) holds the states that predict `targets` (n,); with `baseline_hidden`, also the
    vocabulary-output divergences against the baseline at the same positions."""
    n = targets.shape[0]
    nll = 0.0
    kl_f = kl_r = jsd = 0.0
    agree = 0
    for i0 in range(0, n, chunk):
        i1 = min(i0 + chunk, n)
        lp = head.log_probs(hidden[i0:i1])
        nll -= float(lp.gather(1, targets[i0:i1].view(-1, 1).to(lp.device)).double().sum())
        if baseline_hidden is None:
            continue
        lb = head.log_probs(baseline_hidden[i0:i1])
        agree += int((lb.argmax(dim=-1) == lp.argmax(dim=-1)).sum())
        kf, kr, js = _divergences(lb, lp)
        kl_f, kl_r, jsd = kl_f + kf, kl_r + kr, jsd + js
        del lp, lb
    if baseline_hidden is None:
        return BlockScore(nll, n)
    return BlockScore(nll, n, Divergences(kl_f, kl_r, jsd, agree))
