"""The per-score issue budget of an attention forward on one SM, from nominal rates (pure; nothing is measured).

A score is one element of Q.K^T. Its share of the tensor-core work is 4 * head_dim FLOP: 2d for its dot product in
Q.K^T and 2d for its weight's row in P.V. At the nominal tensor-core rate an SM finishes rate / (4d) scores per
clock; in that time its warp schedulers can issue ISSUE_PER_CLOCK_SM / (scores per clock) thread-instructions per
score, and its MUFU can compute MUFU_EX2_PER_CLOCK_SM / (scores per clock) exponentials per score. That is the
budget the softmax's instructions per score fit in, if the kernel is to stay tensor-core bound. The audit sets
beside it what the SASS shows per element (softbench.audit.sass.per_element_costs): static counts against nominal
rates, a comparison of orders of magnitude, not a prediction of run time (no latency, occupancy, dual issue or
overlap is modelled).

One home for the constants, each with its source."""

from __future__ import annotations

import re

# Dense tensor-core FLOP per clock per SM, by architecture family and input type.
TENSOR_FLOP_PER_CLOCK_SM = {
    # sm_90 (H100/H200): NVIDIA's H100 Tensor Core GPU Architecture whitepaper, dense BF16/FP16 989.4 TFLOPS and
    # FP8 1978.9 TFLOPS on 132 SMs at 1830 MHz: 4096 and 8192 FLOP per clock per SM
    ("sm_90", "bf16"): 4096, ("sm_90", "fp16"): 4096, ("sm_90", "fp8"): 8192,
    # sm_100 (B200): the paper, "Blackwell tensor cores deliver 8192 matrix operations per clock per SM against
    # 16 exponentials"; FP8 is twice BF16 per NVIDIA's B200 datasheet (dense FP8 4.5 PFLOPS, BF16 2.25 PFLOPS)
    ("sm_100", "bf16"): 8192, ("sm_100", "fp16"): 8192, ("sm_100", "fp8"): 16384,
}
# MUFU (SFU) base-2 exponentials per clock per SM: CUDA C++ Programming Guide, arithmetic instruction throughput
# (exp2f: 16 results per clock per SM for compute capability 9.0); for sm_100 the paper's "16 exponentials"
MUFU_EX2_PER_CLOCK_SM = {"sm_90": 16, "sm_100": 16}
# 4 SM sub-partitions, each with one warp scheduler issuing one warp instruction (32 threads) per clock
# (H100 whitepaper, SM architecture; Blackwell keeps the four-partition SM): 128 thread-instructions per clock
WARP_SCHEDULERS_PER_SM = 4
THREADS_PER_WARP = 32
ISSUE_PER_CLOCK_SM = WARP_SCHEDULERS_PER_SM * THREADS_PER_WARP
# tensor-core FLOP per score element per head-dim lane: QK^T (2d) and PV (2d)
FLOP_PER_SCORE_PER_DIM = 4

METHOD = ("nominal: scores per clock per SM = tensor-core FLOP per clock per SM / (4 * head_dim); issue slots per "
          "score = 128 thread-instructions per clock per SM (4 schedulers x 1 warp instruction) / scores per clock; "
          "MUFU exponentials per score = 16 per clock per SM / scores per clock. The per-element column is the "
          "static SASS estimate (instructions of the exponential path per score element, see per_element_method); "
          "share = per element / issue slots per score. Static counts against datasheet rates: no latency, "
          "occupancy, dual issue or overlap is modelled")


def capability(arch: str | int | None) -> int | None:
    """'sm_100a', 'sm_100' or 100 -> 100; None or unparsable -> None."""
    m = re.fullmatch(r"(?:sm_)?(\d+)[a-z]?", str(arch).strip()) if arch is not None else None
    return int(m.group(1)) if m else None


def arch_family(arch: str | int | None) -> str | None:
    """'sm_100a', 'sm_100', 100 or 103 -> 'sm_100'; 'sm_90a' or 90 -> 'sm_90'; None or unparsable -> None."""
    cc = capability(arch)
    return f"sm_{cc // 10 * 10}" if cc is not None else None


def issue_budget(arch: str | int | None, dtype: str, head_dim: int) -> dict | None:
    """The nominal per-score budget for `arch` (see arch_family), or None where no rate is recorded here."""
    family = arch_family(arch)
    rate = TENSOR_FLOP_PER_CLOCK_SM.get((family, dtype))
    if rate is None or head_dim <= 0:
        return None
    per_clock = rate / (FLOP_PER_SCORE_PER_DIM * head_dim)
    mufu = MUFU_EX2_PER_CLOCK_SM[family]
    return {
        "arch_family": family, "dtype": dtype, "head_dim": head_dim,
        "tensor_flop_per_clock_sm": rate, "flop_per_score": FLOP_PER_SCORE_PER_DIM * head_dim,
        "scores_per_clock_sm": per_clock,
        "issue_per_clock_sm": ISSUE_PER_CLOCK_SM, "issue_slots_per_score": ISSUE_PER_CLOCK_SM / per_clock,
        "mufu_ex2_per_clock_sm": mufu, "mufu_ex2_per_score": mufu / per_clock,
        "mufu_clocks_per_score": 1 / mufu, "tensor_clocks_per_score": 1 / per_clock,
    }


def budget_block(arch: str | int | None, dtype: str, head_dim: int,
                 per_element: dict[str, float | None]) -> dict | None:
    """summary.json's `budget`: the nominal budget and, per variant, the static per-element estimate and its share
    of the issue slots per score (None where the estimate is missing)."""
    budget = issue_budget(arch, dtype, head_dim)
    if budget is None:
        return None
    slots = budget["issue_slots_per_score"]
    variants = {v: {"per_element_static": pe, "share_of_issue_slots": None if pe is None else pe / slots}
                for v, pe in per_element.items()}
    return {**budget, "variants": variants, "method": METHOD}
