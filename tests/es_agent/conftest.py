"""Fixtures of the es_agent tests: tiny randomly initialised Qwen2 models (built offline in about a second),
the default prompt pools and sample observations. This folder is put on ``sys.path`` so that its test files
import the bare weight-level test model from ``tiny_models`` (one definition for all of them)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from es_agent.prompts import PromptPools
from es_agent.tiny import tiny_qwen

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

SHOP_AXTREE = "\n".join([
    "[1] RootWebArea 'One Stop Market' focused: True",
    "\t[10] link 'My Account'",
    "\t[11] link 'Sign Out'",
    "\t[17] combobox 'Search' autocomplete: both hasPopup: listbox required: False expanded: False",
    "\t[19] button 'Search'",
    "\t[30] main ''",
    "\t\t[31] heading 'Wireless Mouse'",
    "\t\t[32] StaticText '$12.00'",
    "\t\t[33] button 'Add to Cart'",
    "\t\t[34] checkbox 'Compare' checked: false",
])
FORUM_AXTREE = "\n".join([
    "[1] RootWebArea 'Postmill' focused: True",
    "\t[10] link 'Forums'",
    "\t[13] searchbox 'Search query'",
    "\t[21] link 'books'",
    "\t[22] link 'gaming'",
    "\t[23] StaticText '42 comments'",
])


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """One intra-op thread, as in the rollout workers: on small CPUs (and under load) it is the fastest for
    small-batch inference (DESIGN.md, Known pitfalls). Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny() -> tuple[Any, Any]:
    """A tiny Qwen2 model and its tokenizer (shared: tests must not change its weights)."""
    torch.manual_seed(0)
    return tiny_qwen(seed=0)


@pytest.fixture(scope="session")
def tiny_dir(tiny: tuple[Any, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model saved in Hugging Face layout (safetensors + tokenizer)."""
    model, tokenizer = tiny
    path = tmp_path_factory.mktemp("tiny-qwen")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def pools() -> PromptPools:
    """The package's default prompt pools."""
    return PromptPools.load()


@pytest.fixture
def make_obs() -> Callable[..., dict[str, str]]:
    """Build an observation dict as CONTRACTS.md describes it."""

    def make(axtree: str = SHOP_AXTREE, goal: str = "Search for 'wireless mouse' and tell me its price",
             url: str = "http://127.0.0.1:7770/", error: str = "") -> dict[str, str]:
        return {"axtree": axtree, "url": url, "goal": goal, "tabs": "Tab 0 (current): One Stop Market",
                "last_action_error": error}

    return make
