"""The desktop's whole accessibility tree as OSWorld's XML (envs/desktop/a11y_xml.py), the `accessibility_tree`
getter and the metrics that read it: real OSWorld tasks in a real desktop, and the metrics on trees
written here."""

from __future__ import annotations

import pytest
from lxml import etree

import computerrl.tasks.metrics  # noqa: F401 - registers every metric
from conftest import act, play
from computerrl.envs.desktop.a11y_xml import NS
from computerrl.tasks.registry import METRICS

# OSWorld's libreoffice_impress/ef9d12bd-bcee-4ba0-a40e-918400f43ddf.json, as it is
LEFT_PANEL = {
    "id": "ef9d12bd-bcee-4ba0-a40e-918400f43ddf", "snapshot": "libreoffice_impress",
    "instruction": "I closed the slide panel on the left and idk how to get it back please help",
    "source": "https://www.reddit.com/r/libreoffice/comments/173xdh1/i_closed_the_slide_panel_on_the_left_and_idk_how/",
    "config": [{"type": "launch", "parameters": {"command": ["libreoffice", "--impress"]}},
               {"type": "execute", "parameters": {"command": [
                   "python", "-c", "import pyautogui; import time; pyautogui.click(960, 540); time.sleep(5); "
                   "pyautogui.press('esc'); time.sleep(0.3); pyautogui.press('f10'); time.sleep(0.3); "
                   "pyautogui.press('right', presses=2, interval=0.1); time.sleep(0.3); "
                   "pyautogui.press('down', presses=11, interval=0.1); pyautogui.press('enter')"]}}],
    "trajectory": "trajectories/", "related_apps": ["libreoffice_impress"],
    "evaluator": {"func": "check_left_panel", "result": {"type": "accessibility_tree"}}}
TREE = f"""<desktop-frame xmlns:st="{NS['st']}" xmlns:attr="{NS['attr']}">
  <application name="Thunderbird">
    <frame name="Home - Mozilla Thunderbird">
      <page-tab-list name="" attr:id="tabmail-tabs">
        <page-tab name="Home" st:selected="true"/><page-tab name="About Profiles"/>
      </page-tab-list>
      <label name="greeting">Welcome back</label>
    </frame>
  </application>
  <application name="soffice"><document-frame name="Slides View"/></application>
</desktop-frame>"""
PROFILES = 'application[name=Thunderbird] page-tab-list[attr|id="tabmail-tabs"]>page-tab[name="About Profiles"]'


def check(rules, tree=TREE):
    return METRICS["check_accessibility_tree"](tree, rules)


def test_check_accessibility_tree_selects_by_css_or_xpath_and_scores_the_text():
    assert check([{"selectors": [PROFILES]}]) == 1.0  # OSWorld's thunderbird/12086550
    assert check([{"selectors": [PROFILES.replace("About Profiles", "About Config")]}]) == 0.0
    assert check([{"selectors": ['page-tab[name="Nowhere"]', "page-tab[st|selected]"]}]) == 1.0  # joined by ", "
    assert check([{"xpath": "//page-tab[@st:selected='true']", "text": "", "exact": True}]) == 0.0  # no text
    assert check([{"xpath": "//label", "text": "Welcome back", "exact": True}]) == 1.0
    assert check([{"xpath": "//label", "text": "Welcome back!", "exact": True}]) == 0.0
    assert check([{"xpath": "//label", "text": "Welcome back!", "exact": False}]) == pytest.approx(24 / 25)
    assert check([{"selectors": [PROFILES]}, {"xpath": "//label", "text": "Welcome", "exact": False}]) == \
        pytest.approx(14 / 19)  # a product over the rules
    assert check([{"selectors": [PROFILES]}], tree="<not xml") == 0.0
    assert check([{"selectors": [PROFILES]}], tree=None) == 0.0
    assert METRICS["check_left_panel"](TREE) == 1.0
    assert METRICS["check_left_panel"](TREE.replace("Slides View", "Outline View")) == 0.0
    assert METRICS["check_left_panel"]("") == 0.0


@pytest.mark.desktop
def test_the_left_panel_task_reads_impress_in_the_desktops_tree(env):
    menu = ["Agent.hotkey(['f10'])", "Agent.hotkey(['right'])", "Agent.hotkey(['right'])"]  # the View menu
    # the setup closed the slide pane through that menu (its 11th item); the agent opens it the same way
    reward, info = play(env, LEFT_PANEL, menu + ["Agent.hotkey(['down'])"] * 11 + ["Agent.hotkey(['enter'])",
                                                                               "Agent.wait()", "Agent.exit(True)"])
    assert reward == 1.0, info
    reward, info = play(env, LEFT_PANEL, ["Agent.exit(True)"])
    assert reward == 0.0, info


@pytest.mark.desktop
def test_the_tree_is_osworlds_xml_of_every_application(env, server):
    env.reset()
    act(env, "Agent.open_app('thunderbird')")
    act(env, "Agent.open_app('writer')")
    desktop = server[0].slots[0].desktop
    root = etree.fromstring(desktop.a11y_xml())
    apps = {a.get("name") for a in root}
    assert root.tag == "desktop-frame" and {"Thunderbird", "soffice"} <= apps, apps
    frame = root.find("application[@name='Thunderbird']/frame")
    assert frame is not None and frame.get(f"{{{NS['st']}}}showing") == "true"
    assert frame.get("{https://accessibility.ubuntu.example.org/ns/component}screencoord", "").startswith("(")
    ids = {e.get(f"{{{NS['attr']}}}id") for e in root.iter()}
    assert "tabmail-tabs" in ids or "email" in ids, sorted(i for i in ids if i)[:50]  # Gecko's ids, as attr:id
    assert check([{"selectors": ["application[name=soffice] document-text"]}], etree.tostring(root).decode()) == 1.0
