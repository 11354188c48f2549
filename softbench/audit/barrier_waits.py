"""Where a kernel's warps wait at its mbarriers, wait by wait, from Nsight Compute's per-instruction samples
(softbench.audit.source_stalls reads the page).

ptxas lowers each mbarrier wait of a Gluon kernel to a SYNCS.PHASECHK.TRANS64.TRYWAIT and, a few instructions on, a
branch on its predicate to a retry loop placed at the end of the kernel; CUTLASS's wait (FA3) to a try-wait with a
branch past the wait where it succeeded, then a second try-wait and the branch to the retry loop. A warp suspended
in the try-wait is sampled at that branch (the retry loops collected no samples in the H200 audits), so a wait's
samples are its branch's, and its try-wait's own few. What a wait was for is read from what follows it: the next
warpgroup MMA (HGMMA at 16 bits, QGMMA at FP8) or TMA copy. A wgmma whose A operand is a shared-memory descriptor is
a Q.K^T (the wait was for K, or once per query block for Q); one whose A operand is a register is P.V (the wait was
for V); a TMA copy first is the producer waiting for a free slot. So the audit of a softbench Gluon kernel, or of
FA3, says how long its consumers waited for K and for V and its producer for room."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from softbench.audit.sass import WGMMA_OPCODES
from softbench.audit.source_stalls import EXECUTED, SAMPLES

if TYPE_CHECKING:
    import pandas as pd

TRY_WAIT = "SYNCS.PHASECHK.TRANS64.TRYWAIT"
BRANCH_WITHIN = 6  # instructions after a try-wait searched for its branch (ptxas schedules a few in between)
LOOK_AHEAD = 160  # instructions after a wait searched for the MMA or copy it guards
LARGEST_SHARE = 0.005  # a wait listed in the summary on its own: 0.5% of the samples (about 750 at BF16 16K)
KINDS = ("Q.K^T: K (or Q)", "P.V: V", "producer: a free slot", "other")
_BARRIER = re.compile(r"\[([^\]]+)\]")  # the try-wait's address operand: register + offset


def serves(sources: list[str]) -> str:
    """What the first warpgroup MMA or TMA copy among the instructions `sources` says a wait was for (KINDS)."""
    for text in sources:
        words = [w for w in text.split() if not w.startswith("@")]  # the predicate, if any, left out
        head = words[0] if words else ""
        if head.startswith("UTMALDG"):
            return KINDS[2]
        if head.split(".")[0] in WGMMA_OPCODES:
            return KINDS[0] if text.split(",")[1].strip().startswith("gdesc") else KINDS[1]
    return KINDS[3]


def wait_sites(df: "pd.DataFrame") -> "pd.DataFrame":
    """One row per mbarrier wait on the kernel's main path (the retry loops, whose branch goes back to their
    try-wait, left out): its row in the page, address, barrier offset, samples at its branch, samples in all (its
    try-wait's too), what it waited for, and how often its try-wait ran (warp-level executions: a key loop's waits
    run once per key tile and warp, a query block's Q wait once per block and warp, so the count tells them
    apart)."""
    import pandas as pd

    df = df.reset_index(drop=True)
    src = df["Source"].astype(str)
    samples = df[SAMPLES].astype(int)
    executed = df[EXECUTED].astype(int)
    rows = []
    for i in df.index[src.str.contains(TRY_WAIT, regex=False)]:
        predicate = src[i].split(TRY_WAIT, 1)[1].split(",")[0].strip()
        branch = next((j for j in range(i + 1, min(i + 1 + BRANCH_WITHIN, len(df)))
                       if re.match(rf"@!?{predicate}\s+BRA\s+0x[0-9a-f]+", src[j].strip())), None)
        if branch is not None and int(src[branch].split()[-1], 16) <= int(df["Address"][i], 16):
            continue  # a retry loop
        m = _BARRIER.search(src[i])
        operand = m.group(1) if m else "?"  # e.g. UR15+0x30170: the offset names the barrier, the register varies
        barrier = operand.split("+", 1)[1] if "+0x" in operand else operand
        at_branch = int(samples[branch]) if branch is not None else 0
        if rows and rows[-1]["barrier"] == barrier and i - rows[-1]["end"] <= 2:
            # CUTLASS's wait (FA3): a try-wait and a branch past the wait when it succeeded, then a second try-wait
            # whose branch leads to the retry loop; one wait
            rows[-1].update(at_branch=rows[-1]["at_branch"] + at_branch,
                            samples=rows[-1]["samples"] + at_branch + int(samples[i]), end=branch or i)
            continue
        rows.append({"row": int(i), "address": df["Address"][i], "barrier": barrier, "at_branch": at_branch,
                     "samples": at_branch + int(samples[i]), "serves": serves(list(src[i + 1:i + 1 + LOOK_AHEAD])),
                     "executed": int(executed[i]), "end": branch or i})
    return pd.DataFrame(rows, columns=["row", "address", "barrier", "at_branch", "samples", "serves", "executed",
                                       "end"]).drop(columns="end")


def key_loop_mma_waits(df: "pd.DataFrame") -> int:
    """Samples at the warpgroup-MMA waits (WARPGROUP.DEPBAR) of the key loop: the waits executed most often, once
    per key tile and warp. A consumer that finishes its softmax before its own next Q.K^T (or the P.V before it)
    has left the tensor core waits there, so these samples are its slack: many where the softmax is short against
    the other consumer's wgmmas, few where it is on the critical path (BF16 causal 8K, 20261204T213415Z: noexp 498,
    A0 201, h15-folded-clamped 60)."""
    src = df["Source"].astype(str)
    waits = df[src.str.contains("WARPGROUP.DEPBAR", regex=False)]
    if waits.empty:
        return 0
    executed = waits[EXECUTED].astype(int)
    return int(waits.loc[executed == executed.max(), SAMPLES].astype(int).sum())


def summarize(df: "pd.DataFrame") -> dict:
    """summary.json's source_stalls.<variant>.barrier_waits: samples at the waits' branches per kind (KINDS), and
    the waits with the most (at least LARGEST_SHARE of the page's samples), in the page's order."""
    sites = wait_sites(df)
    floor = LARGEST_SHARE * float(df[SAMPLES].sum())
    big = sites[sites["at_branch"] >= floor]
    return {"at_branch": {k: int(sites.loc[sites["serves"] == k, "at_branch"].sum()) for k in KINDS},
            "largest": [{"row": int(r.row), "barrier": r.barrier, "samples": int(r.at_branch), "serves": r.serves}
                        for r in big.itertuples()]}


def brief(waits: dict | None) -> str:
    """The summary's per-kind samples in one table cell: K (or Q) / V / producer."""
    if not waits:
        return "not recorded"
    n = waits["at_branch"]
    return " / ".join(f"{n.get(k, 0):,}" for k in KINDS[:3])
