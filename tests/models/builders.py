"""Real-library models (transformers, diffusers) from tiny configs with random weights.

No downloads: every model is built from a config (``HF_HUB_OFFLINE=1`` is set on import).
Each entry of ``MODELS`` builds ``(model, args, kwargs)`` as people run it (tokenized ids with
an attention mask, pixel values, a waveform, a noisy latent and a timestep ...); the result's
``fresh()`` draws new random inputs of the same shapes (so a second call must not recompile).
Sizes are tiny (hidden 32-64, 2 layers, sequence 8-16, batch 2): each runs eagerly in a few ms.

    from tests.models.builders import MODELS, build
    b = build("llama")                  # seeded weights and inputs
    model, args, kwargs = b             # unpacks like a tuple
    out = model(*args, **kwargs)
    args2, kwargs2 = b.fresh()          # new random values, same shapes and dtypes
    args3, kwargs3 = b.fresh(train=True)   # with labels: the model computes its own loss

Dropout, layer drop, drop path (stochastic depth) and SpecAugment masking are off in every config
(probabilities 0), so a
model in ``train()`` mode is deterministic and compiled training steps compare with eager's.
Decoders run with ``use_cache=False`` (the outputs are tensors only).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")

import torch

B, T = 2, 8          # batch, sequence length
VOCAB = 128
HIDDEN = 32
HEADS = 4
INTER = 64
LAYERS = 2


@dataclass
class Built:
    """A built model and its inputs; unpacks as ``model, args, kwargs``."""

    model: torch.nn.Module
    args: tuple
    kwargs: dict
    make_inputs: Callable[[bool], tuple]      # (train) -> (args, kwargs), fresh random values

    def fresh(self, train: bool = False):
        """New random inputs of the same shapes; ``train=True`` adds the labels for the loss."""
        return self.make_inputs(train)

    def __iter__(self):
        return iter((self.model, self.args, self.kwargs))


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str               # encoder | decoder | moe | encoder-decoder | audio | vision | diffusion
    make_model: Callable[[], torch.nn.Module]
    make_inputs: Callable[[bool], tuple]
    bench: bool = False       # in the benchmark's default (representative) subset
    tags: tuple = field(default=())


# -- helpers ----------------------------------------------------------------------------------

def _no_dropout(config):
    """Every dropout / layer-drop / drop-path / masking probability in the config set to 0."""
    for k, v in config.to_dict().items():
        if isinstance(v, float) and ("dropout" in k or "pdrop" in k or k.endswith("drop_prob") or "drop_path" in k
                                     or "layerdrop" in k or k.startswith("mask_time_prob")
                                     or k.startswith("mask_feature_prob")):
            setattr(config, k, 0.0)
    for sub in ("text_config", "vision_config"):
        if getattr(config, sub, None) is not None:
            _no_dropout(getattr(config, sub))
    return config


def _hf(model_cls, config_cls, **cfg):
    def make():
        config = _no_dropout(config_cls(**cfg))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model_cls(config)
    return make


def _attention_mask():
    """Row 0 unpadded, row 1 with its last two positions padded (the same in every call)."""
    m = torch.ones(B, T, dtype=torch.long)
    m[1, -2:] = 0
    return m


def _ids(vocab=VOCAB, t=T):
    # Ids from 4 on: 0-3 are the special tokens (pad, bos, eos ...) of these configs.
    return torch.randint(4, vocab, (B, t))


def _text_inputs(labels: str = "mlm", mask=True, token_type=False):
    """ids (+ attention mask) and, for training, labels: mlm/clm -> ids, cls -> class per row."""
    def make(train: bool):
        kw = {"input_ids": _ids()}
        if mask:
            kw["attention_mask"] = _attention_mask()
        if token_type:
            kw["token_type_ids"] = torch.zeros(B, T, dtype=torch.long)
        if train:
            kw["labels"] = torch.randint(0, 2, (B,)) if labels == "cls" else _ids()
        return (), kw
    return make


def _decoder_inputs(train: bool):
    kw = {"input_ids": _ids(), "attention_mask": torch.ones(B, T, dtype=torch.long), "use_cache": False}
    if train:
        kw["labels"] = _ids()
    return (), kw


def _seq2seq_inputs(train: bool):
    kw = {"input_ids": _ids(), "attention_mask": _attention_mask(), "use_cache": False}
    if train:
        kw["labels"] = _ids()            # the model shifts them into decoder_input_ids
    else:
        kw["decoder_input_ids"] = _ids()
    return (), kw


def _decoder_cfg(**extra):
    base = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                num_attention_heads=HEADS, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                eos_token_id=2, tie_word_embeddings=False)
    base.update(extra)
    return base


# -- encoders -----------------------------------------------------------------------------

def _bert():
    from transformers import BertConfig, BertForMaskedLM
    return _hf(BertForMaskedLM, BertConfig, vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
               num_attention_heads=HEADS, intermediate_size=INTER, max_position_embeddings=64)()


def _albert():
    from transformers import AlbertConfig, AlbertForMaskedLM
    return _hf(AlbertForMaskedLM, AlbertConfig, vocab_size=VOCAB, embedding_size=16, hidden_size=HIDDEN,
               num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=INTER,
               max_position_embeddings=64)()


def _electra():
    from transformers import ElectraConfig, ElectraForSequenceClassification
    return _hf(ElectraForSequenceClassification, ElectraConfig, vocab_size=VOCAB, embedding_size=16,
               hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=INTER,
               max_position_embeddings=64, num_labels=2)()


def _deberta_v2():
    from transformers import DebertaV2Config, DebertaV2ForMaskedLM
    return _hf(DebertaV2ForMaskedLM, DebertaV2Config, vocab_size=VOCAB, hidden_size=HIDDEN,
               num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=INTER,
               max_position_embeddings=64, relative_attention=True, position_buckets=16,
               pos_att_type=["p2c", "c2p"], max_relative_positions=-1, norm_rel_ebd="layer_norm",
               share_att_key=True)()


def _distilbert():
    from transformers import DistilBertConfig, DistilBertForSequenceClassification
    return _hf(DistilBertForSequenceClassification, DistilBertConfig, vocab_size=VOCAB, dim=HIDDEN,
               n_layers=LAYERS, n_heads=HEADS, hidden_dim=INTER, max_position_embeddings=64, num_labels=2)()


def _roberta():
    from transformers import RobertaConfig, RobertaForMaskedLM
    return _hf(RobertaForMaskedLM, RobertaConfig, vocab_size=VOCAB, hidden_size=HIDDEN,
               num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=INTER,
               max_position_embeddings=64, pad_token_id=1)()


# -- decoders -----------------------------------------------------------------------------

def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return _hf(GPT2LMHeadModel, GPT2Config, vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
               n_positions=64, n_inner=INTER)()


def _gpt_neox():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    return _hf(GPTNeoXForCausalLM, GPTNeoXConfig, **_decoder_cfg(rotary_pct=0.5))()


def _opt():
    from transformers import OPTConfig, OPTForCausalLM
    return _hf(OPTForCausalLM, OPTConfig, vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
               ffn_dim=INTER, num_attention_heads=HEADS, max_position_embeddings=64, word_embed_proj_dim=HIDDEN,
               pad_token_id=0, bos_token_id=1, eos_token_id=2)()


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return _hf(LlamaForCausalLM, LlamaConfig, **_decoder_cfg(num_key_value_heads=2))()


def _mistral():
    from transformers import MistralConfig, MistralForCausalLM
    return _hf(MistralForCausalLM, MistralConfig, **_decoder_cfg(num_key_value_heads=2, sliding_window=4))()


def _gemma():
    from transformers import GemmaConfig, GemmaForCausalLM
    return _hf(GemmaForCausalLM, GemmaConfig, **_decoder_cfg(num_key_value_heads=1, head_dim=8))()


def _phi():
    from transformers import PhiConfig, PhiForCausalLM
    return _hf(PhiForCausalLM, PhiConfig, **_decoder_cfg(partial_rotary_factor=0.5))()


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return _hf(Qwen2ForCausalLM, Qwen2Config, **_decoder_cfg(num_key_value_heads=2))()


def _mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM
    return _hf(MixtralForCausalLM, MixtralConfig, **_decoder_cfg(num_key_value_heads=2, num_local_experts=4,
                                                                num_experts_per_tok=2))()


# -- encoder-decoders ---------------------------------------------------------------------

def _t5():
    from transformers import T5Config, T5ForConditionalGeneration
    return _hf(T5ForConditionalGeneration, T5Config, vocab_size=VOCAB, d_model=HIDDEN, d_kv=8, d_ff=INTER,
               num_layers=LAYERS, num_decoder_layers=LAYERS, num_heads=HEADS, relative_attention_num_buckets=8,
               pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)()


def _bart():
    from transformers import BartConfig, BartForConditionalGeneration
    return _hf(BartForConditionalGeneration, BartConfig, vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS,
               decoder_layers=LAYERS, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
               encoder_ffn_dim=INTER, decoder_ffn_dim=INTER, max_position_embeddings=64, pad_token_id=1,
               bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None)()


# -- audio --------------------------------------------------------------------------------

def _wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC
    return _hf(Wav2Vec2ForCTC, Wav2Vec2Config, vocab_size=32, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
               num_attention_heads=HEADS, intermediate_size=INTER, conv_dim=(16, 16), conv_stride=(5, 2),
               conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
               feat_extract_norm="group", do_stable_layer_norm=False, pad_token_id=0)()


def _wav2vec2_inputs(train: bool):
    kw = {"input_values": torch.randn(B, 400)}
    if train:
        kw["labels"] = torch.randint(1, 32, (B, 6))
    return (), kw


# -- vision -------------------------------------------------------------------------------

def _vit():
    from transformers import ViTConfig, ViTForImageClassification
    return _hf(ViTForImageClassification, ViTConfig, image_size=32, patch_size=8, num_channels=3,
               hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=INTER,
               num_labels=10)()


def _convnext():
    from transformers import ConvNextConfig, ConvNextForImageClassification
    return _hf(ConvNextForImageClassification, ConvNextConfig, num_channels=3, patch_size=4, num_stages=2,
               hidden_sizes=[16, 32], depths=[1, 1], image_size=32, num_labels=10)()


def _image_inputs(size=32, labels=10):
    def make(train: bool):
        kw = {"pixel_values": torch.randn(B, 3, size, size)}
        if train:
            kw["labels"] = torch.randint(0, labels, (B,))
        return (), kw
    return make


def _clip():
    from transformers import CLIPConfig, CLIPModel
    text = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                num_attention_heads=HEADS, max_position_embeddings=T, pad_token_id=1, bos_token_id=0,
                eos_token_id=2)
    vision = dict(hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  image_size=32, patch_size=8)
    return _hf(CLIPModel, CLIPConfig, text_config=text, vision_config=vision, projection_dim=16)()


def _clip_inputs(train: bool):
    kw = {"input_ids": _ids(), "attention_mask": _attention_mask(), "pixel_values": torch.randn(B, 3, 32, 32)}
    if train:
        kw["return_loss"] = True
    return (), kw


def _swin():
    from transformers import SwinConfig, SwinForImageClassification
    return _hf(SwinForImageClassification, SwinConfig, image_size=32, patch_size=4, num_channels=3, embed_dim=16,
               depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=10)()


def _whisper():
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    return _hf(WhisperForConditionalGeneration, WhisperConfig, vocab_size=VOCAB, num_mel_bins=16, d_model=HIDDEN,
               encoder_layers=LAYERS, decoder_layers=LAYERS, encoder_attention_heads=HEADS,
               decoder_attention_heads=HEADS, encoder_ffn_dim=INTER, decoder_ffn_dim=INTER,
               max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
               eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None, begin_suppress_tokens=None)()


def _whisper_inputs(train: bool):
    kw = {"input_features": torch.randn(B, 16, 32), "use_cache": False}
    if train:
        kw["labels"] = _ids()
    else:
        kw["decoder_input_ids"] = _ids()
    return (), kw


# -- diffusers ------------------------------------------------------------------------------

def _quiet(make):
    """A diffusers model, built quietly, with its dropout off (diffusers has no single knob:
    DiT's class-label embedding drops labels with probability 0.1 in training mode)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if isinstance(getattr(m, "dropout_prob", None), float):
            m.dropout_prob = 0.0
    return model


def _unet2d():
    from diffusers import UNet2DModel
    return _quiet(lambda: UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                                      block_out_channels=(16, 32), norm_num_groups=8,
                                      down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                      up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=8))


def _unet2d_inputs(train: bool):
    kw = {"sample": torch.randn(B, 3, 16, 16), "timestep": torch.randint(0, 1000, (B,))}
    if train:
        kw["target"] = torch.randn(B, 3, 16, 16)       # the noise to predict; popped by the loss helper
    return (), kw


def _unet2d_cond():
    from diffusers import UNet2DConditionModel
    return _quiet(lambda: UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
        norm_num_groups=8, cross_attention_dim=HIDDEN, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")))


def _unet2d_cond_inputs(train: bool):
    kw = {"sample": torch.randn(B, 4, 16, 16), "timestep": torch.randint(0, 1000, (B,)),
          "encoder_hidden_states": torch.randn(B, T, HIDDEN)}
    if train:
        kw["target"] = torch.randn(B, 4, 16, 16)
    return (), kw


def _dit():
    from diffusers import DiTTransformer2DModel
    return _quiet(lambda: DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                                out_channels=8, num_layers=LAYERS, sample_size=8, patch_size=2,
                                                num_embeds_ada_norm=1000, norm_num_groups=8))


def _dit_inputs(train: bool):
    kw = {"hidden_states": torch.randn(B, 4, 8, 8), "timestep": torch.randint(0, 1000, (B,)),
          "class_labels": torch.randint(0, 1000, (B,))}
    if train:
        kw["target"] = torch.randn(B, 8, 8, 8)
    return (), kw


def _vae():
    from diffusers import AutoencoderKL
    return _quiet(lambda: AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1,
                                        block_out_channels=(16, 32), norm_num_groups=8,
                                        down_block_types=("DownEncoderBlock2D",) * 2,
                                        up_block_types=("UpDecoderBlock2D",) * 2, sample_size=16))


def _vae_inputs(train: bool):
    kw = {"sample": torch.randn(B, 3, 16, 16)}
    if train:
        kw["target"] = torch.randn(B, 3, 16, 16)
    return (), kw


# -- the table ----------------------------------------------------------------------------

_SPECS = [
    ModelSpec("bert", "encoder", _bert, _text_inputs("mlm", token_type=True), bench=True),
    ModelSpec("albert", "encoder", _albert, _text_inputs("mlm")),
    ModelSpec("electra", "encoder", _electra, _text_inputs("cls")),
    ModelSpec("deberta_v2", "encoder", _deberta_v2, _text_inputs("mlm"), bench=True),
    ModelSpec("distilbert", "encoder", _distilbert, _text_inputs("cls")),
    ModelSpec("roberta", "encoder", _roberta, _text_inputs("mlm")),
    ModelSpec("gpt2", "decoder", _gpt2, _decoder_inputs, bench=True),
    ModelSpec("gpt_neox", "decoder", _gpt_neox, _decoder_inputs),
    ModelSpec("opt", "decoder", _opt, _decoder_inputs),
    ModelSpec("llama", "decoder", _llama, _decoder_inputs, bench=True),
    ModelSpec("mistral", "decoder", _mistral, _decoder_inputs),
    ModelSpec("gemma", "decoder", _gemma, _decoder_inputs),
    ModelSpec("phi", "decoder", _phi, _decoder_inputs),
    ModelSpec("qwen2", "decoder", _qwen2, _decoder_inputs, bench=True),
    ModelSpec("mixtral", "moe", _mixtral, _decoder_inputs, bench=True),
    ModelSpec("t5", "encoder-decoder", _t5, _seq2seq_inputs, bench=True),
    ModelSpec("bart", "encoder-decoder", _bart, _seq2seq_inputs),
    ModelSpec("wav2vec2", "audio", _wav2vec2, _wav2vec2_inputs, bench=True),
    ModelSpec("whisper", "audio", _whisper, _whisper_inputs),
    ModelSpec("vit", "vision", _vit, _image_inputs(), bench=True),
    ModelSpec("convnext", "vision", _convnext, _image_inputs()),
    ModelSpec("swin", "vision", _swin, _image_inputs()),
    ModelSpec("clip", "vision", _clip, _clip_inputs),
    ModelSpec("unet2d", "diffusion", _unet2d, _unet2d_inputs, bench=True),
    ModelSpec("unet2d_cond", "diffusion", _unet2d_cond, _unet2d_cond_inputs),
    ModelSpec("dit", "diffusion", _dit, _dit_inputs, bench=True),
    ModelSpec("vae", "diffusion", _vae, _vae_inputs),
]
MODELS: dict[str, ModelSpec] = {s.name: s for s in _SPECS}
NAMES = tuple(MODELS)
BENCH = tuple(s.name for s in _SPECS if s.bench)


def seeded(factory, seed):
    """Call ``factory`` under ``seed`` without disturbing the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory()


def build(name: str, *, seed: int = 0, train: bool = False) -> Built:
    """The model (weights seeded by ``seed``; ``eval()`` unless ``train``) and its first inputs."""
    spec = MODELS[name]
    model = seeded(spec.make_model, seed)
    model.train(train)
    args, kwargs = seeded(lambda: spec.make_inputs(train), seed + 1)
    return Built(model, args, kwargs, spec.make_inputs)


# -- the loss of a training step ------------------------------------------------------------

def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):                       # ModelOutput is an OrderedDict
        return next(v for v in out.values() if isinstance(v, torch.Tensor))
    return out[0]


def loss_of(model, args, kwargs):
    """The scalar a training step minimises: the model's own loss when it takes labels
    (transformers), else MSE of the prediction against ``kwargs["target"]`` (diffusers)."""
    kwargs = dict(kwargs)
    target = kwargs.pop("target", None)
    out = model(*args, **kwargs)
    if target is None:
        return out["loss"] if isinstance(out, dict) else out.loss
    pred = _first_tensor(out)
    if hasattr(pred, "sample") and not isinstance(pred, torch.Tensor):
        pred = pred.sample
    return torch.nn.functional.mse_loss(pred, target)
