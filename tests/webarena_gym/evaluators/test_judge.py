"""Judges: WebArena's verdict parsing, the offline fallback, and TransformersJudge on a tiny random Qwen2."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import webarena_gym
from webarena_gym.evaluators import Judge, OfflineJudge, TransformersJudge
from webarena_gym.evaluators.judge import (
    fuzzy_prompt,
    na_reason_prompt,
    parse_fuzzy_verdict,
    parse_na_verdict,
)


@pytest.mark.parametrize(("reply", "expected"), [
    ("Correct", 1.0), ("The answer is correct.", 1.0), ("incorrect", 0.0), ("Partially correct", 0.0),
    ("I cannot tell", None),
])
def test_parse_fuzzy_verdict(reply, expected):
    assert parse_fuzzy_verdict(reply) == expected


@pytest.mark.parametrize(("reply", "expected"), [("[same]", 1.0), ("Different", 0.0), ("unsure", None)])
def test_parse_na_verdict(reply, expected):
    assert parse_na_verdict(reply) == expected


def test_prompts_carry_webarena_wording():
    prompt = fuzzy_prompt("pred", "ref", "q?")
    assert "reference answer: ref" in prompt and "student answer: pred" in prompt
    assert prompt.endswith("Conclude the judgement by correct/incorrect/partially correct.")
    prompt = na_reason_prompt("pred", "reason", "q?")
    assert "actual unachievable reason: reason" in prompt and "respond with 'same'" in prompt


def test_offline_judge_is_lexical_and_labelled():
    judge = OfflineJudge()
    assert isinstance(judge, Judge) and judge.name == "offline-fallback"
    assert judge.fuzzy_match("It is the Pittsburgh International Airport", "Pittsburgh International Airport",
                             "q") == 1.0
    assert judge.fuzzy_match("Pittsburg Internatonal Airport", "Pittsburgh International Airport", "q") == 1.0
    assert judge.fuzzy_match("Cleveland", "Pittsburgh International Airport", "q") == 0.0
    assert judge.na_reason("N/A, there are no reviews about the price", "There is no review about price",
                           "q") == 1.0
    assert judge.na_reason("N/A", "There is no review about price", "q") == 0.0
    with pytest.raises(ValueError, match="thresholds"):
        OfflineJudge(threshold=0.0)


# ---------------------------------------------------------------------------------------- transformers

WORDS = ["correct", "incorrect", "same", "different", "partially", "[UNK]", "[PAD]", "<|im_start|>",
         "<|im_end|>", "system", "user", "assistant", "question:", "reference", "answer:", "student", "task:",
         "reason:", "N/A"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")


@pytest.fixture(scope="module")
def tiny_lm():
    """A randomly initialised 2-layer Qwen2 (hidden 32) with a word-level tokenizer built offline."""
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    vocab = {w: i for i, w in enumerate(WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece(prefix="##")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                        eos_token="<|im_end|>", additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    config = Qwen2Config(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=False, pad_token_id=vocab["[PAD]"],
                         eos_token_id=vocab["<|im_end|>"])
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    return model, tokenizer


@pytest.mark.model
def test_transformers_judge_plumbing_with_random_weights(tiny_lm):
    model, tokenizer = tiny_lm
    judge = TransformersJudge(model, tokenizer, max_new_tokens=4)
    assert isinstance(judge, Judge)
    assert judge.fuzzy_match("Pittsburgh", "Pittsburgh airport", "Which airport?") in (0.0, 1.0)
    assert isinstance(judge.last_response, str)
    assert judge.na_reason("N/A", "no such product", "Find it") in (0.0, 1.0)


@pytest.mark.model
def test_transformers_judge_parses_what_the_model_says(tiny_lm):
    """With a zeroed LM head every logit ties and greedy decoding picks the lowest allowed token id, so
    the reply is steered through ``suppress_tokens``: this exercises prompt -> generate -> decode -> parse."""
    import torch

    model, tokenizer = tiny_lm
    head = model.lm_head.weight.detach().clone()
    try:
        with torch.no_grad():
            model.lm_head.weight.zero_()
        says_correct = TransformersJudge(model, tokenizer, max_new_tokens=3)
        assert says_correct.fuzzy_match("a", "b", "q") == 1.0
        assert says_correct.last_response == "correct correct correct"
        says_incorrect = TransformersJudge(model, tokenizer, max_new_tokens=3,
                                           generate_kwargs={"suppress_tokens": [0]})
        assert says_incorrect.fuzzy_match("a", "b", "q") == 0.0
        says_same = TransformersJudge(model, tokenizer, max_new_tokens=3,
                                      generate_kwargs={"suppress_tokens": [0, 1]})
        assert says_same.na_reason("a", "b", "q") == 1.0
        says_different = TransformersJudge(model, tokenizer, max_new_tokens=3,
                                           generate_kwargs={"suppress_tokens": [0, 1, 2]})
        assert says_different.na_reason("a", "b", "q") == 0.0
        # an unparseable reply scores 0 (WebArena would assert)
        says_other = TransformersJudge(model, tokenizer, max_new_tokens=3,
                                       generate_kwargs={"suppress_tokens": [0, 1, 2, 3]})
        assert says_other.fuzzy_match("a", "b", "q") == 0.0
        assert says_other.last_response.startswith("partially")
    finally:
        with torch.no_grad():
            model.lm_head.weight.copy_(head)


def test_webarena_gym_never_imports_the_agent_or_trainer_packages() -> None:
    """The judge is built by the top layer from a loaded model (``TransformersJudge(model, tokenizer)``):
    no webarena_gym module imports es_agent or cotrain, neither in its source (a lazy import in a function
    included) nor when every module is imported in a fresh interpreter."""
    root = Path(webarena_gym.__file__).parent
    upper = ("es_agent", "cotrain")
    found = []
    for file in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{file.relative_to(root)}:{node.lineno} {n}" for n in names
                      if n.split(".")[0] in upper]
    assert not found
    assert not hasattr(TransformersJudge, "from_spec")
    code = ("import importlib, pkgutil, sys, webarena_gym\n"
            "names = [m.name for m in pkgutil.walk_packages(webarena_gym.__path__, 'webarena_gym.')\n"
            "         if not m.name.endswith('__main__')]\n"
            "for name in names:\n"
            "    importlib.import_module(name)\n"
            "upper = sorted(k for k in sys.modules if k.split('.')[0] in ('es_agent', 'cotrain'))\n"
            "print(len(names), upper)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=300)
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) > 30 and loaded.strip() == "[]", out.stdout
