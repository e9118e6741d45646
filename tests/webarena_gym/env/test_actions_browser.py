"""Every action of the grammar on real Chromium against the local fixture site, as WebArena executes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.browser

FindId = Callable[[dict[str, str], str], int]


def lines_with(obs: dict[str, str], text: str) -> list[str]:
    return [line.strip() for line in obs["axtree"].splitlines() if text in line]


def step(env: Any, action: str) -> dict[str, str]:
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (0.0, False, False), info
    return obs


def test_reset_observation(env: Any) -> None:
    obs, info = env.reset(options={"task_id": 0})
    assert info == {"task_id": 0, "intent": obs["goal"], "sites": ["shopping"], "error": None,
                    "start_url": obs["url"]}
    assert obs["url"].endswith("/index.html")
    assert obs["tabs"] == "Tab 0 (current): Fixture Home"
    assert obs["last_action_error"] == ""
    assert obs["axtree"].startswith("[1] RootWebArea 'Fixture Home' focused: True\n\t[2] navigation 'Main'\n")
    assert "\t\t[3] link 'Products'" in obs["axtree"]
    assert "StaticText 'Unicode: café 東京 😀 ‘quoted’ naïve'" in obs["axtree"]
    assert "textbox 'Search' required: True" in obs["axtree"]
    assert env.observation_space.contains(obs)


def test_click_link_navigates(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    obs = step(env, "click [{}]".format(find_id(obs, "link 'Products'")))
    assert obs["url"].endswith("/products.html")
    assert lines_with(obs, "heading 'Products'")
    assert obs["tabs"] == "Tab 0 (current): Products"


def test_type_without_and_with_enter(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    box = find_id(obs, "textbox 'Search'")
    button = find_id(obs, "button 'Go'")
    obs = step(env, f"type [{box}] [wireless mouse] [0]")
    assert obs["url"].endswith("/index.html")
    assert lines_with(obs, "StaticText 'wireless mouse'")
    # ids of unchanged elements stay valid across steps: the same ids, and they still act
    assert find_id(obs, "textbox 'Search'") == box and find_id(obs, "button 'Go'") == button
    obs = step(env, f"type [{box}] [keyboard]")  # Enter by default; the field is cleared first
    assert obs["url"].endswith("/search.html?q=keyboard")
    assert lines_with(obs, "StaticText 'Results for: keyboard'")


def test_click_button_by_id_from_an_earlier_step(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    box, button = find_id(obs, "textbox 'Search'"), find_id(obs, "button 'Go'")
    step(env, "scroll [down]")
    step(env, f"type [{box}] [mouse] [0]")
    obs = step(env, f"click [{button}]")
    assert obs["url"].endswith("/search.html?q=mouse")


def test_type_clears_selects_and_fills_editables(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 1})
    obs = step(env, "type [{}] [Al] [0]".format(find_id(obs, "textbox 'Name'")))
    assert lines_with(obs, "StaticText 'echo: Al / r / false'")
    # the text inside a field and the field's label both stand for the field
    obs = step(env, "type [{}] [Bo] [0]".format(find_id(obs, "StaticText 'Al'")))
    assert lines_with(obs, "StaticText 'echo: Bo / r / false'")
    obs = step(env, "type [{}] [Bob] [0]".format(find_id(obs, "StaticText 'Name '")))
    assert lines_with(obs, "StaticText 'echo: Bob / r / false'")
    obs = step(env, "type [{}] [Green]".format(find_id(obs, "combobox 'Colour'")))
    assert lines_with(obs, "StaticText 'echo: Bob / g / false'")
    obs = step(env, "click [{}]".format(find_id(obs, "option 'Blue'")))
    assert lines_with(obs, "StaticText 'echo: Bob / b / false'")
    obs = step(env, "click [{}]".format(find_id(obs, "checkbox 'I agree'")))
    assert lines_with(obs, "checkbox 'I agree' focused: True checked: true")
    obs = step(env, "type [{}] [some notes]".format(find_id(obs, "textbox 'Notes'")))
    assert lines_with(obs, "StaticText 'some notes'")
    obs = step(env, "type [{}] [two\nlines] [0]".format(find_id(obs, "textbox 'Message'")))
    assert lines_with(obs, "two")


def test_type_into_non_editable_elements_is_an_observation(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 1})
    obs = step(env, "type [{}] [x]".format(find_id(obs, "heading 'Contact form'")))
    assert "is not a text field" in obs["last_action_error"] and "<h1>" in obs["last_action_error"]
    obs = step(env, "type [{}] [x]".format(find_id(obs, "textbox 'Locked'")))
    assert "is read-only" in obs["last_action_error"]
    obs = step(env, "type [{}] [Purple]".format(find_id(obs, "combobox 'Colour'")))
    assert "has no option 'Purple'" in obs["last_action_error"] and "'Green'" in obs["last_action_error"]
    obs = step(env, "scroll [down]")
    assert obs["last_action_error"] == ""  # a good action clears the error


def test_hover_shows_css_hover_and_fires_mouseover(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    assert not lines_with(obs, "Secret tooltip")
    obs = step(env, "hover [{}]".format(find_id(obs, "StaticText 'Hover me'")))
    assert lines_with(obs, "StaticText 'Secret tooltip'")
    obs = step(env, "hover [{}]".format(find_id(obs, "StaticText 'Mouse zone'")))
    assert lines_with(obs, "StaticText 'mouse: over'")


def test_press_keys_with_meta_mapped_to_control(env: Any) -> None:
    env.reset(options={"task_id": 0})
    obs = step(env, "press [Shift+KeyA]")
    assert lines_with(obs, "StaticText 'key: Shift+A'")
    obs = step(env, "press [Meta+a]")
    assert lines_with(obs, "StaticText 'key: Control+a'")
    obs = step(env, "press [NoSuchKey]")
    assert "press [NoSuchKey] failed" in obs["last_action_error"]


def test_press_enter_submits_the_focused_form(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    step(env, "type [{}] [cable] [0]".format(find_id(obs, "textbox 'Search'")))
    obs = step(env, "press [Enter]")
    assert obs["url"].endswith("/search.html?q=cable")


def test_scroll_moves_the_page(env: Any) -> None:
    env.reset(options={"task_id": 0})
    page = env._session.page
    assert page.evaluate("window.scrollY") == 0
    step(env, "scroll [down]")
    assert page.evaluate("window.scrollY") == env.browser_config.viewport_height
    step(env, "scroll [down]")
    step(env, "scroll [up]")
    assert page.evaluate("window.scrollY") == env.browser_config.viewport_height


def test_tabs_new_focus_close_and_target_blank(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    obs = step(env, "click [{}]".format(find_id(obs, "link 'Products in a new tab'")))
    assert obs["tabs"] == "Tab 0: Fixture Home\nTab 1 (current): Products"  # the new tab becomes current
    assert obs["url"].endswith("/products.html")
    obs = step(env, "new_tab")
    assert obs["tabs"] == "Tab 0: Fixture Home\nTab 1: Products\nTab 2 (current): "
    assert obs["url"] == "about:blank"
    obs = step(env, "tab_focus [0]")
    assert obs["tabs"].startswith("Tab 0 (current): Fixture Home") and obs["url"].endswith("/index.html")
    obs = step(env, "tab_focus [7]")
    assert "there is no tab 7" in obs["last_action_error"]
    obs = step(env, "close_tab")
    assert obs["tabs"] == "Tab 0: Products\nTab 1 (current): "
    step(env, "close_tab")
    step(env, "scroll [down]")  # three close_tab in a row would trigger WebArena's repeated-action stop
    obs = step(env, "close_tab")  # closing the last tab leaves a blank one, as WebArena does
    assert obs["tabs"] == "Tab 0 (current): " and obs["url"] == "about:blank"


def test_goto_back_and_forward(env: Any, site: Any) -> None:
    env.reset(options={"task_id": 0})
    obs = step(env, f"goto [{site.url}/products.html]")
    assert obs["url"] == f"{site.url}/products.html"
    obs = step(env, "goto [/form.html]")  # relative URLs resolve against the current page
    assert obs["url"] == f"{site.url}/form.html"
    obs = step(env, "go_back")
    assert obs["url"] == f"{site.url}/products.html"
    obs = step(env, "go_back")
    assert obs["url"] == f"{site.url}/index.html"
    obs = step(env, "go_forward")
    assert obs["url"] == f"{site.url}/products.html"
    assert obs["last_action_error"] == ""


def test_several_start_urls_open_several_tabs(env: Any) -> None:
    obs, info = env.reset(options={"task_id": 4})
    assert obs["tabs"] == "Tab 0 (current): Fixture Home\nTab 1: Products"
    assert " |AND| " in info["start_url"]


@pytest.mark.parametrize(("answer", "reward"), [("The mouse costs $19.99", 1.0), ("It is $25", 0.0)])
def test_stop_returns_the_evaluator_score(env: Any, answer: str, reward: float) -> None:
    env.reset(options={"task_id": 0})
    obs, got, terminated, truncated, info = env.step(f"stop [{answer}]")
    assert (got, terminated, truncated) == (reward, True, False)
    assert info["episode_end"] == "stop"
    assert info["eval"]["score"] == reward
    assert info["eval"]["components"][0]["pred"]
    assert env.observation_space.contains(obs)
