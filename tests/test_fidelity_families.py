"""The paper's model families on tiny random-weight models built from their configs: softbench's exact path must
reproduce the model's own loss (its own eager attention, which applies its softcap and sliding windows), and the
paths that cannot honour a softcap or a window refuse it."""

import pytest
import torch

from softbench.core.errors import UnsupportedError
from softbench.fidelity import attention, models
from softbench.fidelity.nll import FP32Head, decoder_hidden, score_block
from softbench.fidelity.operator_zoo import parse_operator
from softbench.kernels.capability import Device

from tiny_families import FAMILIES, WINDOW, build

pytest.importorskip("transformers", reason="softbench[fidelity] is not installed")
TEXT = "the cat of the dog is under the old tree by the house. " * 8
CPU = Device("cpu", "cpu", None)


@pytest.fixture(scope="module")
def family_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {f: build(f, root, TEXT) for f in FAMILIES}


def _load(folder, impl):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation=impl).eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_exact_path_reproduces_the_models_own_loss(family_models, family):
    folder = family_models[family]
    model = _load(folder, attention.register())
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, model.config.vocab_size, (1, 3 * WINDOW), generator=g)  # crosses the window
    with torch.inference_mode():
        model.set_attn_implementation("eager")
        own = float(model(input_ids=ids, labels=ids, use_cache=False).loss)
        model.set_attn_implementation(attention.IMPL_NAME)
        attention.ROUTER.use(attention.ExactAttention())
        ours = score_block(FP32Head(model), decoder_hidden(model, ids)[:-1], ids[0, 1:]).to_row()["nll"]
        assert ours == pytest.approx(own, abs=2e-5)
        cfg = model.config
        if getattr(cfg, "attn_logit_softcapping", None) or family.startswith("gemma"):
            # what the family adds matters here: dropping it moves the loss far beyond the tolerance above
            attention.ROUTER.use(_Dropping())
            dropped = score_block(FP32Head(model), decoder_hidden(model, ids)[:-1], ids[0, 1:]).to_row()["nll"]
            assert abs(dropped - own) > 1e-3
            # the tile-wise simulation can do neither: refused, not silently dropped
            attention.ROUTER.use(attention.SimAttention(parse_operator("exp2")))
            with pytest.raises(UnsupportedError, match="softcaps|sliding window"):
                decoder_hidden(model, ids)
            assert models.support_reasons(cfg, "sim", 3 * WINDOW, "bf16", CPU)
            assert models.support_reasons(cfg, "row", 3 * WINDOW, "bf16", CPU) == []
        else:
            assert models.support_reasons(cfg, "sim", 3 * WINDOW, "bf16", CPU) == []


class _Dropping(attention.ExactAttention):
    """Exact attention that ignores the softcap and the window it is handed."""

    def __call__(self, q, k, v, scale, softcap=None, window=None):
        return super().__call__(q, k, v, scale)


def test_gemma3_geometry_is_the_papers(family_models):
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(family_models["gemma-3"])
    assert models.attention_geometry(cfg)["head_dim"] == 256
    assert models._shortest_window(cfg) == WINDOW
    assert models._shortest_window(AutoConfig.from_pretrained(family_models["qwen2.5"])) is None
