"""Tiny randomly initialised Qwen2-architecture models with a real (small) tokenizer, built offline in well
under a second: for tests, examples with tiny budgets and benchmarks of the machinery around the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML, as Qwen and SmolLM2 use it."""

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TINY_VOCAB = 1024

_ROLES = ("link", "button", "textbox", "searchbox", "combobox", "checkbox", "menuitem", "tab", "option",
          "StaticText", "heading", "img", "RootWebArea", "table", "row", "cell", "LineBreak", "main")
_WORDS = ("search", "product", "order", "customer", "price", "review", "forum", "post", "comment", "cart",
          "checkout", "account", "sign in", "email", "password", "submit", "next page", "category", "total",
          "status", "pending", "complete", "shipping", "address", "quantity", "rating", "date", "title",
          "answer", "the", "of", "and", "to", "in", "for", "what", "how", "many", "is", "show", "find")
_ACTIONS = ("click [{i}]", "type [{i}] [{w}] [1]", "hover [{i}]", "press [Enter]", "scroll [down]",
            "scroll [up]", "go_back", "go_forward", "new_tab", "close_tab", "tab_focus [0]",
            "goto [http://localhost:7770/{w}]", "stop [{w}]", "stop [N/A]")


def tiny_corpus() -> list[str]:
    """A small deterministic corpus of accessibility-tree lines, goals and actions."""
    lines: list[str] = []
    for i in range(300):
        role = _ROLES[i % len(_ROLES)]
        word = _WORDS[(7 * i) % len(_WORDS)]
        other = _WORDS[(3 * i + 1) % len(_WORDS)]
        lines.append(f"{chr(9) * (i % 4)}[{i}] {role} '{word.title()} {other}' focused: True")
        lines.append(_ACTIONS[i % len(_ACTIONS)].format(i=i, w=word))
        third = _WORDS[i % len(_WORDS)]
        lines.append(f"OBJECTIVE: {word} {other} of the {third}? URL: http://localhost:7770/")
    lines.append("In summary, the next action I will perform is ```click [12]```")
    return lines


def tiny_tokenizer(vocab_size: int = TINY_VOCAB) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained at call time on :func:`tiny_corpus` (deterministic; digits split one
    per token like Qwen's), with ChatML specials and chat template; ``eos`` is ``<|im_end|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(tiny_corpus(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"], chat_template=CHATML_TEMPLATE,
        clean_up_tokenization_spaces=False)


def tiny_qwen(seed: int = 0, **overrides: Any) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A tiny randomly initialised Qwen2 causal LM (hidden 64, 2 layers, 4 heads, 2 KV heads, MLP 128) and its
    tokenizer, in eval mode. ``overrides`` are ``Qwen2Config`` fields; ``seed`` fixes the weights without
    touching the global torch RNG."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = tiny_tokenizer()
    fields: dict[str, Any] = dict(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        initializer_range=0.2,
    )
    fields.update(overrides)
    config = Qwen2Config(**fields)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.eval()
    return model, tokenizer
