"""Hugging Face model types -> drafter architectures, read from vLLM's speculative config."""

from __future__ import annotations

from pathlib import Path

from mtp_audit.resolve.model_types import model_type_map

SPECULATIVE = """\
def hf_config_override(hf_config, other):
    if hf_config.model_type in ("deepseek_v3", "deepseek_v32"):
        hf_config.model_type = "deepseek_mtp"
    if hf_config.model_type == "deepseek_mtp":
        n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
        hf_config.update({"n_predict": n_predict, "architectures": ["DeepSeekMTPModel"]})
    if hf_config.model_type == "mimo":
        hf_config.model_type = "mimo_mtp"
    if hf_config.model_type == "mimo_mtp":
        if other:
            hf_config["architectures"] = ["MiMoMTPModel"]
    if hf_config.architectures[0] == "MiMoV2FlashForCausalLM":
        hf_config.update({"architectures": ["NotByModelType"]})
    if hf_config.model_type != "glm":
        hf_config.update({"architectures": ["NotEqualIsNoTest"]})
    if hf_config.model_type == "glm" or other:
        hf_config.update({"architectures": ["GlmOrOther"]})
    if "exaone" in hf_config.model_type and other:
        hf_config.update({"architectures": ["ExaoneMTP"]})
    if hf_config.model_type == "qwen" == other:
        hf_config.update({"architectures": ["TwoOperators"]})
    if other.model_type == "ernie":
        hf_config.update({"architectures": [f"Ernie{other}", "ErnieMTPModel", "not an identifier"]})
    elif hf_config.model_type == "pangu":
        hf_config.settings["architectures"] = ["PanguMTP"]
        hf_config.other = ["NotArchitectures"]
        hf_config.update({"layers": ["NotArchitectures"]})
    if hf_config.model_type == "empty":
        pass
"""


def model_types_of(tmp_path: Path, text: str | bytes | None) -> dict[str, list[str]]:
    package = tmp_path / "vllm"
    (package / "config").mkdir(parents=True)
    if text is not None:
        (package / "config" / "speculative.py").write_bytes(text if isinstance(text, bytes) else text.encode())
    return model_type_map(package)


def test_model_types_follow_renames_and_both_forms_of_architectures(tmp_path: Path) -> None:
    assert model_types_of(tmp_path, SPECULATIVE) == {
        "deepseek_mtp": ["DeepSeekMTPModel"],
        "deepseek_v3": ["DeepSeekMTPModel"],
        "deepseek_v32": ["DeepSeekMTPModel"],
        "ernie": ["ErnieMTPModel"],
        "exaone": ["ExaoneMTP"],  # a part of the model type, and a test of the checkpoint taken to hold
        "glm": ["GlmOrOther"],  # each side of an ``or``
        "mimo": ["MiMoMTPModel"],
        "mimo_mtp": ["MiMoMTPModel"],
        "pangu": ["PanguMTP"],
    }


def test_a_rename_chain_carries_every_origin(tmp_path: Path) -> None:
    text = (
        'def f(c):\n    if c.model_type == "a":\n        c.model_type = "b"\n'
        '    if c.model_type in ["b", "x"]:\n        c.model_type = "c"\n'
        '    if c.model_type == "c":\n        c.update({"architectures": ["CModel", "DModel"]})\n'
    )
    assert model_types_of(tmp_path, text) == {name: ["CModel", "DModel"] for name in ("a", "b", "c", "x")}


def test_no_config_or_an_unreadable_one_maps_nothing(tmp_path: Path) -> None:
    assert model_types_of(tmp_path / "none", None) == {}
    assert model_types_of(tmp_path / "broken", "def f(:\n") == {}
    assert model_types_of(tmp_path / "null", b"x = 1\x00\n") == {}


def test_every_architectures_entry_under_one_test_counts(tmp_path: Path) -> None:
    text = (
        'def f(c):\n    if c.model_type == "a":\n'
        '        c.update({"architectures": ["AModel"]})\n        c.update({"architectures": ["AOther"]})\n'
        '        c["architectures"] = ["AThird"]\n        c["architectures"] = ["AFourth"]\n'
    )
    assert model_types_of(tmp_path, text) == {"a": ["AFourth", "AModel", "AOther", "AThird"]}


def test_only_an_assignment_to_model_type_is_a_rename(tmp_path: Path) -> None:
    text = (
        'def f(c):\n    if c.model_type == "a":\n        c.name = "b"\n        label = "b"\n'
        '        c.update({"architectures": ["AModel"]})\n'
        '    if c.model_type == "b":\n        c.update({"architectures": ["BModel"]})\n'
    )
    assert model_types_of(tmp_path, text) == {"a": ["AModel"], "b": ["BModel"]}


def test_an_architecture_named_by_a_local_counts_its_literal_values(tmp_path: Path) -> None:
    """``architecture = "A" if moe else "B"``, then ``"architectures": [architecture]``: both; the strings
    a comparison in the block tests (``moe = c.model_type in ("m_moe",)``) are no architectures."""
    text = (
        'def f(c):\n    if c.model_type in ("m", "m_moe") and c.layers > 0:\n'
        '        moe = c.model_type in ("m_moe", "m_moe_text")\n'
        '        architecture = "MoeMTP" if moe else "DenseMTP"\n'
        '        c.update({"architectures": [architecture]})\n'
    )
    assert model_types_of(tmp_path, text) == {"m": ["DenseMTP", "MoeMTP"], "m_moe": ["DenseMTP", "MoeMTP"]}
