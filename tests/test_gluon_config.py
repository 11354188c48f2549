"""The Gluon forward's configuration (softbench.kernels.gluon_config) on its own: each option's label suffix read
back, alone and in every valid combination, and the combinations the kernel is not written for refused in one
sentence. What each option does to the compiled kernel is tests/test_gluon_attn.py's."""

import pytest

pytest.importorskip("triton")

from softbench.kernels.gluon_config import (HANDOVERS, RESCALE_AT, RESCALES, ROW_SUMS, SCHEDULES,  # noqa: E402
                                           SYNCS, GluonConfig)
from softbench.core.errors import UsageError  # noqa: E402


def test_labels_round_trip_and_bad_ones_are_refused():
    c = GluonConfig()
    assert c.label() == "gluon-n128s2-c240l24-hg8"
    assert GluonConfig.from_label(c.label()) == c
    other = GluonConfig(block_n=64, stages=4, consumer_registers=232, loader_registers=40, head_group=16)
    assert GluonConfig.from_label(other.label()) == other
    pp = GluonConfig(pingpong=True)
    assert pp.label() == "gluon-n128s2-c240l24-hg8-pp" and GluonConfig.from_label(pp.label()) == pp
    named = GluonConfig(pingpong=True, handover="named")
    assert named.label() == "gluon-n128s2-c240l24-hg8-ppn" and GluonConfig.from_label(named.label()) == named
    with pytest.raises(UsageError, match="needs the ping-pong"):
        GluonConfig(handover="named")
    with pytest.raises(UsageError, match="mbarrier or named"):
        GluonConfig(pingpong=True, handover="spin")
    one = GluonConfig(consumers=1)
    assert one.label() == "gluon-n128s2-c240l24-hg8-g1" and GluonConfig.from_label(one.label()) == one
    skip = GluonConfig(consumers=1, rescale="moved")
    assert skip.label() == "gluon-n128s2-c240l24-hg8-g1-rs" and GluonConfig.from_label(skip.label()) == skip
    both = GluonConfig(pingpong=True, handover="named", rescale="moved")
    assert both.label() == "gluon-n128s2-c240l24-hg8-ppn-rs" and GluonConfig.from_label(both.label()) == both
    with pytest.raises(UsageError, match="rescaled"):
        GluonConfig(rescale="never")
    trimmed = GluonConfig(consumers=1, rescale="moved", sync="mbarrier")
    assert trimmed.label() == "gluon-n128s2-c240l24-hg8-g1-rs-tb"
    assert GluonConfig.from_label(trimmed.label()) == trimmed
    assert GluonConfig.from_label("gluon-n128s2-c240l24-hg8-tb").sync == "mbarrier"
    parts = GluonConfig(consumers=1, row_sum="thread", sync="mbarrier")
    assert parts.label() == "gluon-n128s2-c240l24-hg8-g1-lt-tb" and GluonConfig.from_label(parts.label()) == parts
    # -lt sums in another order: its plain form keeps it (checked against the simulation, not bit for bit)
    assert parts.plain() == GluonConfig(consumers=1, row_sum="thread")
    on_mma = GluonConfig(consumers=1, row_sum="mma", sync="mbarrier")
    assert on_mma.label() == "gluon-n128s2-c240l24-hg8-g1-lm-tb" and GluonConfig.from_label(on_mma.label()) == on_mma
    assert on_mma.plain().row_sum == "mma"  # -lm sums the rounded P: its own reference, not another's bits
    per_tile = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-lmt-tb")
    assert per_tile.row_sum == "mma-tile" and per_tile.label() == "gluon-n128s2-c240l24-hg8-g1-lmt-tb"
    early = GluonConfig(consumers=1, rescale_at="pv", row_sum="thread", sync="mbarrier")
    assert early.label() == "gluon-n128s2-c240l24-hg8-g1-ro-lt-tb" and GluonConfig.from_label(early.label()) == early
    assert early.plain() == GluonConfig(consumers=1, row_sum="thread")  # -ro changes no bit
    with pytest.raises(UsageError, match="rescaled at the tail or pv"):
        GluonConfig(rescale_at="never")
    tree = GluonConfig.from_label("gluon-n128s2-c240l24-hg8-g1-ro-ltt-tb")
    assert (tree.row_sum, tree.rescale_at, tree.consumers) == ("tree", "pv", 1) and tree.label().endswith("-ro-ltt-tb")
    with pytest.raises(UsageError, match="kept per row or thread or tree"):
        GluonConfig(row_sum="warp")
    # what -rs and -tb are checked against bit for bit: the same configuration without them
    assert trimmed.plain() == one and one.plain() == one
    with pytest.raises(UsageError, match="synchronize by membar or mbarrier"):
        GluonConfig(sync="none")
    with pytest.raises(UsageError, match="ping-pong needs two"):
        GluonConfig(pingpong=True, consumers=1)
    with pytest.raises(UsageError, match="1 or 2 consumer"):
        GluonConfig(consumers=3)
    assert c.to_dict()["kernel"] == "gluon" and c.to_dict()["label"] == c.label()
    for bad in ("gluon-n128s2", "m128n64w8s2", "gluon-n128s2-c240l24-hg8-x"):
        with pytest.raises(UsageError, match="Gluon configuration label"):
            GluonConfig.from_label(bad)
    with pytest.raises(UsageError, match="key tiles of 64 or 128"):
        GluonConfig(block_n=256)
    with pytest.raises(UsageError, match="at least 2"):
        GluonConfig(stages=1)
    with pytest.raises(UsageError, match="multiple of 8"):
        GluonConfig(consumer_registers=236)


def test_register_counts_and_head_group_are_refused_outside_their_range():
    """setmaxnreg takes 24..256 in steps of 8: both ends are taken, a step beyond either is refused; a head group
    holds at least one head; the deferred epilogue (-pde) is refused with -sq here, without compiling anything."""
    for v in (24, 256):
        assert GluonConfig(consumer_registers=v, loader_registers=v).consumer_registers == v
    for name in ("consumer_registers", "loader_registers"):
        for v in (16, 264):
            with pytest.raises(UsageError, match=f"{name} must be a multiple of 8 in 24..256"):
                GluonConfig(**{name: v})
    assert GluonConfig(head_group=1).head_group == 1
    with pytest.raises(UsageError, match="head_group must be >= 1"):
        GluonConfig(head_group=0)
    with pytest.raises(UsageError, match="deferred epilogue"):
        GluonConfig(schedule="dynamic-deferred", split_qk=True)


def test_every_combination_of_label_options_reads_back():
    """Each option's label suffix, in every valid combination (ping-pong and its hand-over, one or two consumers,
    the four schedules, the rescale's five forms and its place, the row sums' five forms, the barriers), parses
    back to the same configuration."""
    import itertools

    seen = set()
    for pingpong, handover, consumers, schedule, rescale, rescale_at, row_sum, sync in itertools.product(
            (False, True), HANDOVERS, (1, 2), SCHEDULES, RESCALES, RESCALE_AT, ROW_SUMS, SYNCS):
        try:
            config = GluonConfig(pingpong=pingpong, handover=handover, consumers=consumers, schedule=schedule,
                                 rescale=rescale, rescale_at=rescale_at, row_sum=row_sum, sync=sync)
        except UsageError:
            continue  # refused by the configuration itself (a valid one refused would show in the count below)
        assert GluonConfig.from_label(config.label()) == config, config.label()
        seen.add(config.label())
    # (2 ping-pong hand-overs + the four schedules, each with 1 or 2 consumers) x 5 x 2 x 5 x 2, every label
    # distinct: 320 before -pt, which added 160 (no ping-pong: the configuration refuses it), -pd 160 more, the
    # fifth rescale form (-rlan) a quarter more, -pde another 200 (-sq, which it refuses, is not varied here), and
    # -pdo 60 (2 x 5 rescales x -ro only x 3 row sums in registers x 2), and -ppn with -pd 100 (5 x 2 x 5 x 2)
    assert len(seen) == 1160
