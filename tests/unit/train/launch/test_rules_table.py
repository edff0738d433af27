"""The rules table (train/settings/rules.json, read by train/settings/rules.py): every rule complete, the
preflight's values read from it, the docs' table generated from it, and a planted difference caught both by the
preflight and by the docs' check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.helpers import rules_doc
from train.settings import rules
from train.settings.expected import differences, expected_settings, implementation_settings
from train.settings.rules import DERIVED, GATE, HOW, RULES, SETTINGS, SOURCES, WHY, Rule
from utils.config.model import Config
from utils.spec.models import ModelShape, get_shape


def test_every_rule_has_a_source_a_how_and_a_reason_for_each_exemption() -> None:
    assert isinstance(rules.VERSION, int) and rules.VERSION >= 1
    assert len(RULES) == len(SETTINGS) + len(GATE), "a key is ruled twice"
    for rule in (*SETTINGS, *GATE):
        assert rule.source in SOURCES, rule.key
        assert rule.how in HOW if rule in SETTINGS else len(rule.how) > 10, rule.key
        assert rule.why in WHY, rule.key
        assert all(who and len(why) > 10 for who, why in rule.exempt.items()), rule.key
        if rule.source == "derived":
            assert rule.ref in DERIVED, rule.key
    assert {r.ref for r in SETTINGS if r.source == "derived"} == set(DERIVED), "a derivation no rule uses"
    shape_fields = {f.name for f in dataclasses.fields(ModelShape)}
    for rule in SETTINGS:
        if rule.source == "config.env":
            assert hasattr(Config(), rule.ref), rule.key
        if rule.source == "model shape":
            assert rule.ref in shape_fields, rule.key


def test_the_preflight_compares_every_setting_rule_and_nothing_else() -> None:
    cfg = Config(fp8=True)
    shape = get_shape("llama", "full")
    wanted = {**expected_settings(cfg, "nvd", shape, 128256), **implementation_settings("local")}
    assert sorted(wanted) == sorted(r.key for r in SETTINGS)
    assert list(expected_settings(cfg, "nvd", shape, 128256)) == [r.key for r in SETTINGS if r.key in wanted and
                                                                  r.source != "MEGATRON_IMPL"]  # the table's order
    assert wanted["attention_backend"] == "auto" and wanted["apply_rope_fusion"] is False  # the local values
    assert "fp8_recipe" not in expected_settings(Config(), "nvd", shape, 128256)  # FP8's rules under FP8 only


@pytest.mark.parametrize("framework", ["mega", "prim", "nemo"])
def test_a_planted_difference_in_any_setting_is_caught_unless_the_framework_is_exempt(framework: str) -> None:
    table = expected_settings(Config(fp8=True), "amd", get_shape("qwen", "full"), 152064)
    assert differences(table, dict(table), framework) == []
    for key, want in table.items():
        planted = "planted" if not isinstance(want, str) else want + "-planted"
        found = differences(table, {**table, key: planted}, framework)
        assert found == ([] if framework in RULES[key].exempt else [(key, want, planted)]), key
        missing = differences(table, {k: v for k, v in table.items() if k != key}, framework)
        assert [k for k, _, _ in missing] == ([] if framework in RULES[key].exempt else [key])


def test_the_docs_table_is_generated_from_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    doc = rules_doc.DOC.read_text(encoding="utf-8")
    assert rules_doc.with_table(doc) == doc, "docs/CONFORMANCE.md is stale: python -m tests.helpers.rules_doc --write"
    assert rules_doc.main(["--check"]) == 0
    section = rules_doc.table_markdown()
    for rule in (*SETTINGS, *GATE):
        assert f"| `{rule.key}` |" in section
    assert f"Rules version {rules.VERSION}: {len(SETTINGS)} setting rules, {len(GATE)} gate rules" in section
    assert rules_doc.main([]) == 0 and capsys.readouterr().out.strip() == section


def test_a_rule_changed_without_the_docs_is_caught(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    changed = tuple(dataclasses.replace(r, ref=4) if r.key == "num_workers" else r for r in SETTINGS)
    monkeypatch.setattr(rules_doc, "SETTINGS", changed)
    assert rules_doc.main(["--check"]) == 1
    assert "table is stale: python -m tests.helpers.rules_doc --write" in capsys.readouterr().err
    monkeypatch.setattr(rules_doc, "GATE", (*GATE, Rule("planted", "baseline", 0.5, how="a planted gate rule")))
    with pytest.raises(AssertionError):
        test_the_docs_table_is_generated_from_the_rules(capsys)


def test_a_doc_without_the_generated_section_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "CONFORMANCE.md"
    doc.write_text("# no table here\n", encoding="utf-8")
    monkeypatch.setattr(rules_doc, "DOC", doc)
    assert rules_doc.main(["--write"]) == 2 and "no generated rules section" in capsys.readouterr().err
    assert doc.read_text(encoding="utf-8") == "# no table here\n"
