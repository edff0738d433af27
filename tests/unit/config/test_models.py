"""utils/spec/models.py: the shape table and Megatron's FLOPs formula against hand-computed values."""

from __future__ import annotations

import pytest

from utils.spec.models import flops_per_token, get_shape, matmul_weights_per_token, mfu
from utils.spec.registry import MODELS


def test_llama_8b_flops_per_token_at_8192_hand_computed():
    # N' = 32*(4096*128*(32+2*8) + 4096^2 + 3*4096*14336) + 4096*128256
    #    = 32*(25,165,824 + 16,777,216 + 176,160,768) + 525,336,576 = 7,504,658,432
    # weights: 6*N' = 45,027,950,592; attention 12*L*s*h = 12*32*8192*4096 = 12,884,901,888
    shape = get_shape("llama", "full")
    assert matmul_weights_per_token(shape) == 7_504_658_432
    flops = flops_per_token(shape, 8192)
    assert flops.full == 45_027_950_592 + 12_884_901_888  # 57.9 GFLOP/token (Megatron's dense formula)
    assert flops.causal == 45_027_950_592 + 6_442_450_944  # 51.5 GFLOP/token
    assert round(flops.full / 1e9, 1) == 57.9 and round(flops.causal / 1e9, 1) == 51.5


def test_qwen_7b_flops_at_2048_hand_computed():
    # head dim 128; N' = 28*(3584*128*(28+8) + 3584^2 + 3*3584*18944) + 3584*152064
    #    = 28*(16,515,072 + 12,845,056 + 203,685,888) + 544,997,376 = 7,070,285,824
    shape = get_shape("qwen", "full")
    assert matmul_weights_per_token(shape) == 7_070_285_824
    assert flops_per_token(shape, 2048).full == 6 * 7_070_285_824 + 12 * 28 * 2048 * 3584


def test_full_shapes_match_the_design_table():
    llama, qwen = get_shape("llama"), get_shape("qwen")
    assert (llama.num_layers, llama.hidden_size, llama.ffn_hidden_size, llama.num_attention_heads,
            llama.num_query_groups, llama.vocab_size, llama.rope_theta, llama.norm_eps) == (
        32, 4096, 14336, 32, 8, 128256, 500000.0, 1e-5)
    assert (qwen.num_layers, qwen.hidden_size, qwen.ffn_hidden_size, qwen.num_attention_heads,
            qwen.num_query_groups, qwen.vocab_size, qwen.rope_theta, qwen.norm_eps) == (
        28, 3584, 18944, 28, 4, 152064, 1000000.0, 1e-6)
    assert qwen.qkv_bias and not llama.qkv_bias
    assert llama.rope_scaling["rope_type"] == "llama3" and qwen.rope_scaling is None
    assert round(llama.parameter_count() / 1e9, 2) == 8.03 and round(qwen.parameter_count() / 1e9, 2) == 7.62


def test_mistral_7b_v03_matches_its_published_config_and_flops_by_hand():
    # The published config.json of mistralai/Mistral-7B-v0.3 (utils/spec/models.py's docstring, docs/MODELS.md).
    m = get_shape("mistral")
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads, m.num_query_groups,
            m.vocab_size, m.rope_theta, m.norm_eps, m.max_position_embeddings) == (
        32, 4096, 14336, 32, 8, 32768, 1000000.0, 1e-5, 32768)
    assert not m.qkv_bias and not m.tied_embeddings and m.swiglu and m.rope_scaling is None
    assert (m.hf_repo, m.hf_architecture) == ("mistralai/Mistral-7B-v0.3", "MistralForCausalLM")
    # N' = 32*(4096*128*(32+2*8) + 4096^2 + 3*4096*14336) + 4096*32768 = 32*218,103,808 + 134,217,728
    assert matmul_weights_per_token(m) == 7_113_539_584
    assert flops_per_token(m, 4096).causal == 6 * 7_113_539_584 + 6 * 32 * 4096 * 4096
    # 32*(41,943,040 attention + 176,160,768 MLP + 8,192 norms) + 2*32768*4096 embeddings + 4096 final norm
    assert m.parameter_count() == 7_248_023_552  # "7.25B", as the model card says


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_tiny_keeps_every_architectural_feature(model):
    full, tiny = get_shape(model, "full"), get_shape(model, "tiny", vocab_size=2048)
    assert tiny.vocab_size == 2048
    assert full.num_attention_heads // full.num_query_groups == tiny.num_attention_heads // tiny.num_query_groups
    assert tiny.hidden_size % tiny.num_attention_heads == 0
    assert abs(full.ffn_hidden_size / full.hidden_size - tiny.ffn_hidden_size / tiny.hidden_size) < 0.05
    for feature in ("qkv_bias", "swiglu", "tied_embeddings", "rope_theta", "norm_eps", "rope_scaling"):
        assert getattr(full, feature) == getattr(tiny, feature)
    assert tiny.parameter_count() < 2_000_000


def test_bad_shape_requests():
    with pytest.raises(ValueError, match="MODEL_SIZE='huge'"):
        get_shape("llama", "huge")
    with pytest.raises(ValueError, match="model 'gpt'"):
        get_shape("gpt")
    with pytest.raises(ValueError, match="vocab_size=0"):
        get_shape("llama", vocab_size=0)


def test_mfu():
    assert mfu(1000.0, 1e12, 1000.0) == pytest.approx(1.0)  # 1000 tok/s * 1 TFLOP/token = 1 PFLOP/s
    assert mfu(1000.0, 1e12, None) is None


@pytest.mark.parametrize("size", ["full", "tiny"])
def test_every_registry_model_has_a_shape_named_by_the_registry(size):
    for key, model in MODELS.items():
        shape = get_shape(key, size)
        assert shape.key == key
        assert shape.display_name == (model.display_name if size == "full" else f"{model.display_name} (tiny)")


def test_model_layers_proxy_keeps_width_heads_vocab_and_is_labelled():
    full, proxy = get_shape("llama"), get_shape("llama", "full", layers=8)
    assert proxy.num_layers == 8 and proxy.proxy_of_layers == 32
    assert proxy.display_name == "Llama 3.1 8B [8 of 32 layers]"
    same = ("hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "vocab_size", "rope_theta")
    assert all(getattr(proxy, name) == getattr(full, name) for name in same)
    # FLOPs follow the proxy: 8 layers of 218,103,808 matrix weights + the 525,336,576 output layer
    assert matmul_weights_per_token(proxy) == 8 * 218_103_808 + 525_336_576
    assert flops_per_token(proxy, 2048).full == 6 * (8 * 218_103_808 + 525_336_576) + 12 * 8 * 2048 * 4096
    # The model's own depth is the model itself, not a proxy.
    assert get_shape("qwen", "full", layers=28) == get_shape("qwen")
    assert get_shape("llama", "tiny", layers=1).display_name == "Llama 3.1 8B (tiny) [1 of 2 layers]"


@pytest.mark.parametrize("layers", [0, -1, 33, True, "8"])
def test_model_layers_out_of_range_is_one_line(layers):
    with pytest.raises(ValueError, match=r"MODEL_LAYERS=.*llama \(full\) has 32 layers; use 1 to 32") as info:
        get_shape("llama", "full", layers=layers)
    assert "\n" not in str(info.value)


def test_workload_shape_applies_model_size_and_layers():
    from utils.config.model import Config
    from utils.spec.models import workload_shape

    assert workload_shape(Config(model_layers=8), "mistral").display_name == "Mistral 7B v0.3 [8 of 32 layers]"
    assert workload_shape(Config(model_size="tiny"), "qwen") == get_shape("qwen", "tiny")
