"""tools/analysis/mbarrier_waits.py on the committed audits of BF16 causal 16K (2026-12-04): the wait counts the README
quotes for -ka come back from the per-instruction pages, and what each site guards is read right."""

from pathlib import Path

import pytest

from tests.repo_tools import load_tool

ROOT = Path(__file__).resolve().parents[1]
waits = load_tool("analysis/mbarrier_waits.py")
PAIRED = ROOT / "sessions/20261204T172236Z-audit-bf16-16K-causal-b1h16d128-triton"
K_AHEAD = ROOT / "sessions/20261204T172302Z-audit-bf16-16K-causal-b1h16d128-triton"


def _sites(folder: Path):
    from softbench.audit import source_stalls

    return waits.wait_sites(source_stalls.read(folder / "ncu" / "A0-sass.csv.gz"))


def test_the_k_ahead_figures_come_back_from_the_audits():
    """README (the leases of 17:07-17:38): the first consumer's K wait 1,867 samples in the paired order against
    1,075 under -ka, the second's 1,489 against 1,446, the V waits 2,477 against 2,823 (the two key loops' sites), the producer's two
    polls 10,497 and 316 against 3,810 and 6,515 (the samples at each wait's branch)."""
    paired, ahead = _sites(PAIRED), _sites(K_AHEAD)
    big = lambda s, kind: sorted(s[(s.serves == kind) & (s.at_branch > 1000)].at_branch.tolist())  # noqa: E731
    assert big(paired, "Q.K^T: K (or Q)") == [1489, 1867]
    assert big(ahead, "Q.K^T: K (or Q)") == [1075, 1446]
    assert sum(big(paired, "P.V: V")) == 2477 and sum(big(ahead, "P.V: V")) == 2823  # the key loops' two sites
    assert sorted(paired[paired.serves == "producer: a free slot"].at_branch)[-2:] == [316, 10497]
    assert sorted(ahead[ahead.serves == "producer: a free slot"].at_branch)[-2:] == [3810, 6515]


def test_a_site_counts_its_try_wait_and_its_branch_and_skips_retry_loops():
    """Each main-path wait's own samples plus its branch's; the retry loops at the kernel's end (whose branch goes
    back) are not sites: every site's position is before the first retry loop's, and no try-wait with zero samples
    in the main path is dropped."""
    sites = _sites(K_AHEAD)
    assert (sites.samples >= sites.at_branch).all()
    assert sites.address.is_unique
    first = sites[sites.at_branch == 1075].iloc[0]
    assert first.samples == 1075 + 115  # the try-wait's own 115
    assert len(sites) < 52  # of the page's 52 try-waits, the retry loops' are left out


@pytest.mark.parametrize("sources, kind", [
    (["USGXT.U32 UR34, UR34, 0xe", "WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR32], RZ, !UPT"],
     "Q.K^T: K (or Q)"),
    (["F2FP.BF16.F32.PACK_AB R152, R219, R228", "HGMMA.64x128x16.F32.BF16 R88, R152, gdesc[UR12].tnspB, R88"],
     "P.V: V"),
    (["SYNCS.ARRIVE.TRANS64 RZ, [UR17+0x30170], R2", "UTMALDG.3D [UR8], [UR26]"], "producer: a free slot"),
    (["IADD3 R1, R1, 0x1, RZ", "EXIT"], "other"),
])
def test_what_a_wait_guards_is_the_next_mma_or_copy(sources, kind):
    assert waits._serves(sources) == kind
