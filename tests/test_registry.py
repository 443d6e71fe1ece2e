"""Which classes are drafters: the registry dicts of a vLLM tree, or names in a plugin directory."""

from __future__ import annotations

import os
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from mtp_audit.errors import UsageError
from mtp_audit.index.modules import ModuleIndex
from mtp_audit.model import PLATFORMS, PluginDist, RegistryEntry, SourceTree
from mtp_audit.resolve.plugins import GENERAL, PLATFORM, REGISTERED, PluginReading, Registration, effective_registry
from mtp_audit.resolve.registry import heuristic_entries, read_registry

REGISTRY = "vllm/model_executor/models/registry.py"


def registry_of(tmp_path: Path, text: str | bytes) -> list[RegistryEntry]:
    path = tmp_path / REGISTRY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return read_registry(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))


def test_registry_entries_from_every_dict(tmp_path: Path) -> None:
    entries = registry_of(
        tmp_path,
        """\
_TEXT_GENERATION_MODELS = {
    "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
    "Eagle2_5_VLForConditionalGeneration": ("eagle2_5_vl", "Eagle2_5_VLForConditionalGeneration"),
    "MiMoMTPModel": ("mimo_mtp", "MiMoMTP"),
    "Broken": ("only_one",),
    **_OTHER,
}
_TRANSFORMERS_BACKEND_MODELS: dict[str, tuple[str, str]] = {
    "TransformersMTP": ("transformers", "TransformersMTPModel"),
}
_SPECULATIVE_DECODING_MODELS = {
    "EagleLlamaForCausalLM": ("llama_eagle", "EagleLlamaForCausalLM"),
    "DeepSeekV4MTPModel": ("vllm.models.deepseek_v4", "DeepSeekV4MTP"),
    **_TRANSFORMERS_BACKEND_MODELS,
}
NOT_A_DICT = list()
""",
    )
    assert entries == [
        RegistryEntry(
            "EagleLlamaForCausalLM",
            "vllm.model_executor.models.llama_eagle",
            "EagleLlamaForCausalLM",
            "_SPECULATIVE_DECODING_MODELS",
        ),
        RegistryEntry("DeepSeekV4MTPModel", "vllm.models.deepseek_v4", "DeepSeekV4MTP", "_SPECULATIVE_DECODING_MODELS"),
        # spread into the speculative dict, where Python puts it: reported there, once
        RegistryEntry(
            "TransformersMTP",
            "vllm.model_executor.models.transformers",
            "TransformersMTPModel",
            "_SPECULATIVE_DECODING_MODELS",
        ),
        RegistryEntry("MiMoMTPModel", "vllm.model_executor.models.mimo_mtp", "MiMoMTP", "_TEXT_GENERATION_MODELS"),
    ]


SPEC = "_SPECULATIVE_DECODING_MODELS"
DICT_FORMS = [
    (  # ** of a dict bound earlier, spread in place; a later duplicate key replaces the earlier value
        f'_BASE = {{"AMTP": ("m", "A")}}\n{SPEC} = {{"DMTP": ("m", "D1"), **_BASE, "DMTP": ("m", "D2")}}\n',
        [("DMTP", "D2"), ("AMTP", "A")],
        [],
    ),
    (  # statements after the literal, in order
        f'{SPEC} = {{"AMTP": ("m", "A"), "GoneMTP": ("m", "G")}}\n'
        f'{SPEC}["SetMTP"] = ("m", "S")\n'
        f'{SPEC}.update({{"UpdMTP": ("m", "U")}}, KwMTP=("m", "K"))\n'
        f'{SPEC}.update(**{{"StarMTP": ("m", "St")}})\n'
        f'del {SPEC}["GoneMTP"]\n'
        f'{SPEC}["AMTP"] = ("m", "A2")\n',
        [("AMTP", "A2"), ("SetMTP", "S"), ("UpdMTP", "U"), ("KwMTP", "K"), ("StarMTP", "St")],
        [],
    ),
    (  # unions of literals and of names, and |=
        '_LATE = {"LMTP": ("m", "L")}\n'
        f'{SPEC}: dict[str, tuple[str, str]] = {{"AMTP": ("m", "A")}} | _LATE\n'
        f'{SPEC} = {SPEC} | {{"UMTP": ("m", "U")}}\n'
        f'{SPEC} |= {{"IMTP": ("m", "I")}}\n',
        [("AMTP", "A"), ("LMTP", "L"), ("UMTP", "U"), ("IMTP", "I")],
        [],
    ),
    (  # B = A names the same dict, as in Python: a change through either is seen by both
        f'_BASE = {{"AMTP": ("m", "A")}}\n{SPEC} = _BASE\n_BASE["BMTP"] = ("m", "B")\n',
        [("AMTP", "A"), ("BMTP", "B")],
        [],
    ),
    (  # what cannot be read statically is named, with its line; the rest is still read
        f"""\
def make():
    return {{}}


_SPREAD = {{**make()}}
{SPEC} = {{
    "AMTP": ("m", "A"),
    **make(),
    **{{k: v for k, v in make().items()}},
    **_LATER,
    **_SPREAD,
}}
{SPEC}.update(make())
{SPEC} = {SPEC} | make()
{SPEC}.pop("AMTP")
{SPEC} -= {{}}
del {SPEC}[key]
if FLAG:
    {SPEC}["IfMTP"] = ("m", "I")
try:
    {SPEC}.update(extra)
except ImportError:
    pass
_LATER = {{}}
""",
        [("AMTP", "A")],
        [
            "8: `**make()`: not a dict literal",
            "9: `**{k: v for k, v in make().items()}`: not a dict literal",
            "10: `**_LATER`: not a dict literal",
            "5: `**make()`: not a dict literal",  # in _SPREAD, spread into the speculative dict
            f"13: `{SPEC}.update(make())`: `make()` is not a dict literal",
            "14: `make()`: not a dict literal",
            f"15: `{SPEC}.pop('AMTP')`: a change mtp-audit does not follow",
            f"16: `{SPEC} -= {{}}`: a change mtp-audit does not follow",
            f"17: `del {SPEC}[key]`: a key that is not a string",
            f"19: `{SPEC}['IfMTP'] = ('m', 'I')`: inside a module-level `if` block",
            f"21: `{SPEC}.update(extra)`: inside a module-level `try` block",
        ],
    ),
    (  # other dicts: entries spread into a later dict are reported once; their gaps are not warned about
        f'_TEXT = {{"XMTP": ("m", "X"), **make()}}\n{SPEC} = {{}}\n_ALL = {{**_TEXT, **{SPEC}, **make()}}\n',
        [("XMTP", "X")],
        [],
    ),
    (  # names bound to a key string or a (module, class) pair, as Python reads them
        f'TOY = "ToyMTP"\n_TOY = ("m", "Toy")\n_PAIR = ["m", "P"]\n{SPEC} = {{TOY: _TOY}}\n'
        f"{SPEC}[TOY + 'X'] = _TOY\n{SPEC}['PMTP'] = _PAIR\nTOY = 'ToyMTPX'\ndel {SPEC}[TOY]\n"
        f'_MOD, _CLS = "m", "Q"\n{SPEC}["QMTP"] = (_MOD, _CLS)\n{SPEC}[make()] = _TOY\n',
        [("ToyMTP", "Toy"), ("PMTP", "P"), ("QMTP", "Q")],
        [f"11: `{SPEC}[make()] = _TOY`: a key that is not a string"],
    ),
    (  # dict(...) and .copy() make new dicts; a later change of the source is not in the copy
        f'_BASE = {{"AMTP": ("m", "A")}}\n{SPEC} = dict(_BASE, KwMTP=("m", "K"), **{{"StarMTP": ("m", "S")}})\n'
        f'_OTHER = _BASE.copy()\n_BASE["Late"] = ("m", "L")\n{SPEC}.update(_OTHER)\n',
        [("AMTP", "A"), ("KwMTP", "K"), ("StarMTP", "S")],
        [],
    ),
    (  # a dict of dicts, and tuple unpacking
        f'_ALL = {{"spec": {{"AMTP": ("m", "A")}}}}\n_X, {SPEC} = {{}}, _ALL["spec"]\n'
        '_ALL["spec"]["BMTP"] = ("m", "B")\n',
        [("AMTP", "A"), ("BMTP", "B")],
        [],
    ),
    (  # a module function that changes the dict, called at top level: said, with both lines
        f"def _register(arch, module, cls):\n    {SPEC}[arch] = (module, cls)\n\n\n"
        f'{SPEC} = {{"AMTP": ("m", "A")}}\n_register("OMTP", "m", "O")\n',
        [("AMTP", "A")],
        ["6: `_register('OMTP', 'm', 'O')`: a call of `_register` (line 1), which changes it at line 2"],
    ),
    (  # an entry a later dict replaces while merging is not one (vLLM's ModelRegistry is _VLLM_MODELS)
        f'_A = {{"AMTP": ("m", "A"), "BMTP": ("m", "B1"), "CMTP": ("m", "C1")}}\n'
        f'_B = {{"BMTP": ("m", "B2")}}\n{SPEC} = {{**_A, **_B}}\n'
        f'_LATE = {{"CMTP": ("m", "C2")}}\n_VLLM_MODELS = {{**{SPEC}, **_LATE}}\n',
        [("AMTP", "A"), ("BMTP", "B2"), ("CMTP", "C2")],
        [],
    ),
    (  # what may change a dict and is not followed: each named with its line; a dict rebound in a block is unknown
        f"def _add(models):\n    models['XMTP'] = ('m', 'X')\n\n\n"
        f'_EXTRA = {{"OldMTP": ("m", "Old")}}\n{SPEC} = {{"AMTP": ("m", "A")}}\n_add({SPEC})\n'
        f"class _Late:\n    {SPEC}['LateMTP'] = ('m', 'L')\n"
        f"for _EXTRA in ({{}},):\n    pass\n{SPEC}.update(_EXTRA)\n",
        [("AMTP", "A")],
        [
            f"7: `_add({SPEC})`: passed to `_add`, which may change it",
            f"9: `{SPEC}['LateMTP'] = ('m', 'L')`: inside a module-level `class` block",
            f"12: `{SPEC}.update(_EXTRA)`: `_EXTRA` is not a dict literal",
        ],
    ),
    (  # ``A.pop("K")`` assigned: the entry leaves A and goes where it is assigned; constants inside a pair
        f'_MOD = "m"\n{SPEC} = {{"OldMTP": (_MOD, "A")}}\n{SPEC}["NewMTP"] = {SPEC}.pop("OldMTP")\n',
        [("NewMTP", "A")],
        [],
    ),
    (  # _VLLM_MODELS read whole is what ModelRegistry holds: an entry outside it is said, not reported; a
        # dict merged after the speculative one that cannot be read may replace its classes: said too
        f'{SPEC} = {{"AMTP": ("m", "A")}}\n_VLLM_MODELS = {{**make(), **{SPEC}}}\n{SPEC}["LateMTP"] = ("m", "L")\n'
        f'_OTHER = {{"BMTP": ("m", "B")}}\n_ALL = {{**{SPEC}, **make()}}\n',
        [("AMTP", "A"), ("LateMTP", "L"), ("BMTP", "B")],
        [],
    ),
]


@pytest.mark.parametrize(
    "text, found, notes",
    DICT_FORMS,
    ids=[
        *("spread-duplicates", "statements", "unions", "alias", "unreadable", "others"),
        *("constants", "dict-call-and-copy", "nested-and-unpacking", "function-call", "merge-replaces"),
        *("changes-not-followed", "pop-moves-an-entry", "model-registry-membership"),
    ],
)
def test_the_speculative_dict_is_read_as_python_builds_it(
    tmp_path: Path, text: str, found: list[tuple[str, str]], notes: list[str]
) -> None:
    from mtp_audit.resolve.registry import registry_reading

    path = tmp_path / REGISTRY
    path.parent.mkdir(parents=True)
    path.write_text(text)
    entries, warnings = registry_reading(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert [(e.arch, e.cls) for e in entries] == found
    assert len(warnings) == len(notes), warnings
    for warning, note in zip(warnings, notes):
        assert warning.startswith(f"{REGISTRY}:{note}"), warning
        assert warning.endswith(f"; {SPEC} may hold drafters mtp-audit does not see")


@pytest.mark.parametrize(
    "text, message",
    [
        ("_SPECULATIVE_DECODING_MODELS = {\n", f"{REGISTRY}: syntax error at line 1; cannot read the registry"),
        (b"_SPECULATIVE_DECODING_MODELS = {}\x00\n", f"{REGISTRY}: source code string cannot contain null bytes"),
        ("_MODELS = {}\n", f"{REGISTRY}: no _SPECULATIVE_DECODING_MODELS dict; is this a vLLM tree?"),
        (
            "_SPECULATIVE_DECODING_MODELS = {k: v for k, v in PAIRS}\n",
            f"{REGISTRY}: _SPECULATIVE_DECODING_MODELS is not a dict literal; mtp-audit reads it statically",
        ),
        (
            "_SPECULATIVE_DECODING_MODELS = dict(a=1)\n",
            f"{REGISTRY}: an entry of _SPECULATIVE_DECODING_MODELS is not a (module, class) string pair (line 1)",
        ),
        (
            "from ._speculative import _SPECULATIVE_DECODING_MODELS\n",
            f"{REGISTRY}: _SPECULATIVE_DECODING_MODELS is imported from vllm.model_executor.models._speculative, "
            "which is not in the tree; cannot read the registry",
        ),
        (
            '_SPECULATIVE_DECODING_MODELS = {"A": ("a", CLASS)}\n',
            f"{REGISTRY}: an entry of _SPECULATIVE_DECODING_MODELS is not a (module, class) string pair",
        ),
        (
            "_SPECULATIVE_DECODING_MODELS = {NAME: ('a', 'A')}\n",
            f"{REGISTRY}: an entry of _SPECULATIVE_DECODING_MODELS is not a (module, class) string pair",
        ),
    ],
)
def test_an_unreadable_registry_says_why(tmp_path: Path, text: str | bytes, message: str) -> None:
    with pytest.raises(UsageError) as info:
        registry_of(tmp_path, text)
    assert str(info.value).startswith(message)


def test_plugin_drafters_are_found_by_file_and_class_name(tmp_path: Path) -> None:
    files = {
        "my_mtp.py": "class MyMTP:\n    pass\n\n\nclass _PrivateMTP:\n    pass\n\n\nclass Helper:\n    pass\n",
        "models/eagle_head.py": "class EagleHead:\n    pass\n",
        "models/__init__.py": "class TopMTP:\n    pass\n",  # not a drafter-named module
        "acme_mtp/__init__.py": "class AcmeMTP:\n    pass\n",  # a drafter-named package
        "plugins/inner_mtp/__init__.py": "class InnerMTP:\n    pass\n",  # one inside another package
        "__init__.py": "class RootMTP:\n    pass\n",  # the tree's own: no module
        "helpers.py": "class HelperMTP:\n    pass\n",  # not a drafter-named file
        "tests/test_mtp.py": "class FakeMTP:\n    pass\n",
        "test/x_mtp.py": "class FakeMTP:\n    pass\n",
        ".hidden/y_mtp.py": "class HiddenMTP:\n    pass\n",
        "__pycache__/z_mtp.py": "class CachedMTP:\n    pass\n",
        "broken_mtp.py": "class BrokenMTP(\n",
        "zz_medusa.py": "class LastMedusa:\n    pass\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    entries = heuristic_entries(ModuleIndex(SourceTree(tmp_path, None, None)))
    assert entries == [
        RegistryEntry(None, "acme_mtp", "AcmeMTP", "heuristic"),
        RegistryEntry(None, "models.eagle_head", "EagleHead", "heuristic"),
        RegistryEntry(None, "my_mtp", "MyMTP", "heuristic"),
        RegistryEntry(None, "plugins.inner_mtp", "InnerMTP", "heuristic"),
        RegistryEntry(None, "zz_medusa", "LastMedusa", "heuristic"),
    ]


def test_entries_around_unreadable_ones_are_still_read(tmp_path: Path) -> None:
    entries = registry_of(
        tmp_path,
        """\
a = b = {"Chained": ("x", "ChainedMTP")}
obj.attr = {"NotRead": ("x", "NotReadMTP")}
_ANNOTATED_ONLY: dict
_TEXT_GENERATION_MODELS = {
    **_OTHER,
    "Broken": ("only_one",),
    "AListMTP": ["a_list", "AListMTP"],
    "NotAPair": NAME,
    "FirstMTP": ("first_mtp", "FirstMTP"),
    "ByClassOnly": ("by_class", "ByClassMTP"),
    "ByArchMTP": ("by_arch", "ByArchOnly"),
}
_SPECULATIVE_DECODING_MODELS: dict[str, tuple[str, str]] = {
    **_TRANSFORMERS_BACKEND_MODELS,
    "EagleLlamaForCausalLM": ("llama_eagle", "EagleLlamaForCausalLM"),
}
""",
    )
    assert entries == [
        RegistryEntry(
            "EagleLlamaForCausalLM",
            "vllm.model_executor.models.llama_eagle",
            "EagleLlamaForCausalLM",
            "_SPECULATIVE_DECODING_MODELS",
        ),
        # one dict bound to two names, read once (Python builds one); a list pair unpacks as a tuple does
        RegistryEntry("Chained", "vllm.model_executor.models.x", "ChainedMTP", "a"),
        RegistryEntry("AListMTP", "vllm.model_executor.models.a_list", "AListMTP", "_TEXT_GENERATION_MODELS"),
        RegistryEntry("FirstMTP", "vllm.model_executor.models.first_mtp", "FirstMTP", "_TEXT_GENERATION_MODELS"),
        RegistryEntry("ByClassOnly", "vllm.model_executor.models.by_class", "ByClassMTP", "_TEXT_GENERATION_MODELS"),
        RegistryEntry("ByArchMTP", "vllm.model_executor.models.by_arch", "ByArchOnly", "_TEXT_GENERATION_MODELS"),
    ]


@pytest.mark.parametrize("name", ["_SPECULATIVE_DECODING_MODELS", "_TEXT_GENERATION_MODELS"])
def test_a_module_outside_the_package_is_refused_in_any_dict(tmp_path: Path, name: str) -> None:
    text = f'{name} = {{"EvilMTP": ("../../etc/evil", "EvilMTP")}}\n'
    if name != "_SPECULATIVE_DECODING_MODELS":
        text = "_SPECULATIVE_DECODING_MODELS = {}\n" + text
    with pytest.raises(UsageError) as info:
        registry_of(tmp_path, text)
    assert str(info.value) == (
        f"{REGISTRY}: {name}['EvilMTP'] names module '../../etc/evil', which is not a dotted "
        "module name; mtp-audit reads only modules inside the tree"
    )


def test_a_registry_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    (tmp_path / REGISTRY).mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(UsageError) as info:
        read_registry(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert str(info.value) == f"{REGISTRY}: cannot be read (Is a directory); cannot read the registry"


def test_a_plugin_tree_that_cannot_be_listed_names_the_directory_and_why(tmp_path: Path) -> None:
    """A directory whose path runs past the system's limit (root or not, listing it fails): the
    scan stops with that directory and the system's reason, not a traceback."""
    parent = os.open(tmp_path, os.O_RDONLY)
    for _ in range(20):  # 20 nested names of 250 characters: past PATH_MAX (4,096)
        os.mkdir("d" * 250, dir_fd=parent)
        child = os.open("d" * 250, os.O_RDONLY, dir_fd=parent)
        os.close(parent)
        parent = child
    os.close(parent)
    with pytest.raises(UsageError) as info:
        heuristic_entries(ModuleIndex(SourceTree(tmp_path, None, None)))
    where, _, why = str(info.value).rpartition(": ")
    assert why == "cannot be read (File name too long)"
    assert where.startswith(f"{tmp_path}/{'d' * 250}/") and len(where) > 4096


def test_plugin_files_that_cannot_be_modules_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "my-eagle.py").write_text("class HyphenEagle:\n    pass\n")  # not importable: no module name
    (tmp_path / "ok_mtp.py").write_text("class OkMTP:\n    pass\n")
    entries = heuristic_entries(ModuleIndex(SourceTree(tmp_path, None, None)))
    assert entries == [RegistryEntry(None, "ok_mtp", "OkMTP", "heuristic")]


def test_plugin_registrations_replace_in_tree_entries_where_they_apply() -> None:
    npu, cuda_plugin, general = (PluginDist(name, "1.0", Path("/site"), ()) for name in ("npu", "kernels", "acme"))
    deepseek = RegistryEntry(
        "DeepSeekMTPModel", "vllm.model_executor.models.deepseek_mtp", "DeepSeekMTP", "_SPECULATIVE_DECODING_MODELS"
    )
    target = RegistryEntry(
        "LlamaForCausalLM", "vllm.model_executor.models.llama", "LlamaForCausalLM", "_TEXT_GENERATION_MODELS"
    )
    in_tree = [deepseek, target]
    replaced = (deepseek.module, deepseek.cls)

    def reading(plugin: PluginDist, group: str, platforms: list[str], *registered: tuple[str, str, str]):
        return PluginReading(
            [
                Registration(arch, module, cls, plugin, group, "reg.py", line)
                for line, (arch, module, cls) in enumerate(registered, 1)
            ],
            platforms,
            [],
        )

    # a platform plugin on its own device: the in-tree entry stays everywhere else
    on_npu = reading(
        npu,
        PLATFORM,
        ["npu"],
        ("DeepSeekMTPModel", "npu_ext.mtp", "NpuMTP"),
        ("LlamaForCausalLM", "npu_ext.llama", "NpuLlama"),
    )  # not a drafter: left alone, and in use on the plugin's platform too
    assert effective_registry(in_tree, [on_npu]) == [
        deepseek,
        replace(target, scope=(*PLATFORMS, "npu")),
        RegistryEntry("DeepSeekMTPModel", "npu_ext.mtp", "NpuMTP", REGISTERED, "npu 1.0", replaced, ("npu",)),
    ]
    # a platform plugin for an in-tree platform: the in-tree entry keeps the other platforms
    on_cuda = reading(cuda_plugin, PLATFORM, ["cuda"], ("DeepSeekMTPModel", "kernels.mtp", "FastMTP"))
    assert effective_registry(in_tree, [on_cuda]) == [
        RegistryEntry(
            deepseek.arch, deepseek.module, deepseek.cls, deepseek.registry, "vllm", None, ("cpu", "rocm", "tpu", "xpu")
        ),
        target,
        RegistryEntry("DeepSeekMTPModel", "kernels.mtp", "FastMTP", REGISTERED, "kernels 1.0", replaced, ("cuda",)),
    ]
    # a general plugin applies wherever it loads, after the platform plugins: it replaces them too;
    # its calls run one after another, the last of an architecture wins; new drafters join
    everywhere = ("cpu", "cuda", "rocm", "tpu", "xpu", "npu")
    anywhere = reading(
        general,
        GENERAL,
        [],
        ("DeepSeekMTPModel", "acme.mtp", "AcmeMTP"),
        ("DeepSeekMTPModel", "acme.mtp_v2", "AcmeMTPv2"),
        ("DeepSeekMTPModel", "acme.mtp", "AcmeMTP"),
        ("AcmeDraftModel", "acme.draft", "AcmeDraft"),
        ("Eagle3Acme", "acme.eagle", "AcmeHead"),
        ("AcmeForCausalLM", "acme.target", "AcmeForCausalLM"),
    )
    assert effective_registry(in_tree, [anywhere, on_npu]) == [
        replace(target, scope=everywhere),
        RegistryEntry("DeepSeekMTPModel", "acme.mtp", "AcmeMTP", REGISTERED, "acme 1.0", replaced, everywhere),
        RegistryEntry("AcmeDraftModel", "acme.draft", "AcmeDraft", REGISTERED, "acme 1.0", None, everywhere),
        RegistryEntry("Eagle3Acme", "acme.eagle", "AcmeHead", REGISTERED, "acme 1.0", None, everywhere),
    ]


def test_a_plugin_source_tree_in_process(tmp_path: Path) -> None:
    """What `scan PLUGIN_DIR --vllm VLLM` reports (tests/test_plugins.py), in this process."""
    from test_plugins import plugin_source, vllm_tree

    from mtp_audit.locate import locate, runs_with
    from mtp_audit.scan import scan

    tree = runs_with(locate(plugin_source(tmp_path / "src")), str(vllm_tree(tmp_path / "v")))
    result, _, _ = scan(tree)
    found = {(r.arch, r.cls, r.source, r.replaces and r.replaces[1]) for r in result.records}
    assert found == {
        ("OtherMTPModel", "AcmeOtherMTP", "acme-vllm-plugin 1.2.0", "OtherMTP"),
        ("AcmeNewMTPModel", "AcmeNewMTP", "acme-vllm-plugin 1.2.0", None),
        ("UnreachedMTPModel", "UnreachedMTP", "acme-vllm-plugin 1.2.0", None),
        (None, "SpareMTP", "vllm", None),
    }


@pytest.mark.parametrize(
    ("files", "name", "version"),
    [
        ({"PKG-INFO": "Metadata-Version: 2.1\nName: from-sdist\nVersion: 2.0\n"}, "from-sdist", "2.0"),
        ({"x.egg-info/PKG-INFO": "Name: from-egg\nVersion: 3.0\n"}, "from-egg", "3.0"),
        ({"y-1.0.dist-info/METADATA": "Name: from-wheel\nVersion: 1.0\n"}, "from-wheel", "1.0"),
        (
            {"PKG-INFO": "Name: no-version\n", "pyproject.toml": '[project]\nname = "from-pyproject"\nversion = "4"\n'},
            "from-pyproject",
            "4",
        ),
        ({"pyproject.toml": '[project]\nname = "dynamic"\ndynamic = ["version"]\n'}, "dynamic", "(dynamic version)"),
        ({"pyproject.toml": "[project\n"}, "plugin", "(no version)"),  # not TOML: the directory's name
        ({"pyproject.toml": '[tool.other]\nname = "not-a-project"\n'}, "plugin", "(no version)"),
        ({}, "plugin", "(no version)"),
        ({"PKG-INFO": b"Name: latin-summary\nVersion: 1.1\nSummary: caf\xe9\n"}, "latin-summary", "1.1"),  # not UTF-8
    ],
)
def test_a_plugin_tree_is_named_by_its_metadata(
    tmp_path: Path, files: dict[str, str | bytes], name: str, version: str
) -> None:
    from mtp_audit.resolve.plugins import tree_plugin

    root = tmp_path / "plugin"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text if isinstance(text, bytes) else text.encode())
    root.mkdir(exist_ok=True)
    plugin = tree_plugin(root)
    assert (plugin.name, plugin.version, plugin.location, plugin.entry_points) == (name, version, root, ())


def test_the_modules_of_a_plugin_tree_that_mention_a_word(tmp_path: Path) -> None:
    from mtp_audit.resolve.plugins import tree_modules

    files = {
        "pkg/__init__.py": "register_model",
        "pkg/a.py": "x.register_model(...)",
        "pkg/b.py": "nothing",
        "pkg/latin.py": b"# caf\xe9\nregister_model",  # not UTF-8: still read
        "pkg/sub/__init__.py": "register_model",
        "pkg/__pycache__/stale.py": "register_model",
        "top.py": "register_model",
        "tests/t.py": "register_model",
        "pkg/test/t.py": "register_model",
        ".hidden/h.py": "register_model",
        "not-a-module.py": "register_model",
        "pkg/c.txt": "register_model",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(text if isinstance(text, bytes) else text.encode())
    (tmp_path / "pkg/0dir.py").mkdir()  # named like a module, cannot be read as one
    os.mkfifo(tmp_path / "pkg/pipe.py")  # read without waiting for a writer: not a hang
    index = ModuleIndex(SourceTree(root=tmp_path, package_dir=None, vllm_version=None))
    assert tree_modules(index, "register_model") == ["pkg", "pkg.a", "pkg.latin", "pkg.sub", "top"]


PLUGIN_REGISTRATIONS = textwrap.dedent("""\
    from vllm import ModelRegistry
    import vllm
    from acme import models
    from acme.models import mtp as mtp_module
    from acme.models.mtp import ImportedMTP
    from .models.rel import RelativeMTP


    class LocalMTP:
        pass


    def register():
        from acme.models.inner import InnerMTP
        ModelRegistry.register_model("StringMTP", "acme.models.mtp:StringMTP")
        ModelRegistry.register_model("ImportedMTPModel", ImportedMTP)
        ModelRegistry.register_model("LocalMTPModel", LocalMTP)
        ModelRegistry.register_model("InnerMTPModel", InnerMTP)
        ModelRegistry.register_model("AttrMTPModel", models.AttrMTP)
        ModelRegistry.register_model("SubAttrMTPModel", mtp_module.SubMTP)
        ModelRegistry.register_model(model_arch="KeywordMTPModel", model_cls="acme.models.kw:KeywordMTP")
        vllm.ModelRegistry.register_model("DottedMTPModel", "acme.models.d:DottedMTP")
        ModelRegistry.register_model("RelativeMTPModel", RelativeMTP)
        ModelRegistry.register_model("StringMTP", "acme.models.mtp:StringMTP")
        ModelRegistry.register_model("NoColon", "acme.models.mtp")
        ModelRegistry.register_model("TwoColons", "acme.models:mtp:TwoMTP")
        ModelRegistry.register_model(ARCH, "acme.x:Y")
        ModelRegistry.register_model("Unknown", unknown_name)
        ModelRegistry.register_model("Call", make())
        OtherRegistry.register_model("Other", "a:b")


    ModelRegistry.register_model("ModuleLevelMTP", "acme.top:TopMTP")
""")


def test_every_form_of_register_model_in_a_plugin_tree(tmp_path: Path) -> None:
    from mtp_audit.resolve.plugins import registrations_in

    (tmp_path / "acme/models").mkdir(parents=True)
    (tmp_path / "acme/__init__.py").write_text("")
    (tmp_path / "acme/models/__init__.py").write_text("")
    (tmp_path / "acme/reg.py").write_text(PLUGIN_REGISTRATIONS)
    (tmp_path / "acme/broken.py").write_text("def f(:\n")
    plugin = PluginDist("acme", "1.0", tmp_path, ())
    reading = registrations_in(
        ModuleIndex(SourceTree(tmp_path, None, None)), ["acme.reg", "acme.broken", "acme.absent"], plugin
    )
    assert [(r.arch, r.module, r.cls, r.line) for r in reading.registrations] == [
        ("StringMTP", "acme.models.mtp", "StringMTP", 15),  # a "module:Class" string
        ("ImportedMTPModel", "acme.models.mtp", "ImportedMTP", 16),  # a class imported at module level
        ("LocalMTPModel", "acme.reg", "LocalMTP", 17),  # a class of the module
        ("InnerMTPModel", "acme.models.inner", "InnerMTP", 18),  # imported inside the function
        ("AttrMTPModel", "acme.models", "AttrMTP", 19),  # an attribute of an imported package
        ("SubAttrMTPModel", "acme.models.mtp", "SubMTP", 20),  # of an imported module, renamed
        ("KeywordMTPModel", "acme.models.kw", "KeywordMTP", 21),  # by keyword
        ("DottedMTPModel", "acme.models.d", "DottedMTP", 22),  # vllm.ModelRegistry
        ("RelativeMTPModel", "acme.models.rel", "RelativeMTP", 23),  # a relative import
        ("StringMTP", "acme.models.mtp", "StringMTP", 24),  # the same again, another call
        ("ModuleLevelMTP", "acme.top", "TopMTP", 33),  # outside any function
    ]
    assert {(r.plugin, r.group, r.file) for r in reading.registrations} == {(plugin, GENERAL, "acme/reg.py")}
    unreadable = (
        "register_model with arguments that are not a string architecture and a 'module:Class' "
        "string or an imported class"
    )
    assert reading.skipped == [
        *(f"acme/reg.py:{line}: {unreadable}" for line in (25, 26, 27, 28, 29)),
        "acme/reg.py:30: OtherRegistry.register_model(...) is not followed to vLLM's ModelRegistry",
        "acme/broken.py: cannot parse (invalid syntax (<unknown>, line 1))",
    ]
    assert reading.platforms == []


PLUGIN_FILES = {
    "beta/__init__.py": "from beta.impl import register as register\nfrom beta.impl import helper\n",
    "beta/impl.py": textwrap.dedent("""\
        import other_pkg
        from vllm import ModelRegistry
        from beta import more


        def register():
            helper()
            more.deeper()
            other_pkg.register_all()


        def helper():
            ModelRegistry.register_model('HelperMTP', 'beta.m:HelperMTP')
    """),
    "beta/more.py": "from vllm import ModelRegistry\n\n\ndef deeper():\n"
    "    ModelRegistry.register_model('DeeperMTP', 'beta.m:DeeperMTP')\n",
    "beta/platform.py": textwrap.dedent("""\
        def activate():
            return 'beta.platform.BetaPlatform'


        def typed():
            return 'beta.platform.TypedPlatform'


        def unnamed():
            return 'beta.platform.Unnamed'


        def nothing():
            return None


        class BetaPlatform:
            device_name = 'beta_npu'


        class TypedPlatform:
            device_type: str = 'beta_typed'


        class Unnamed:
            pass
    """),
    "other_pkg/__init__.py": "from vllm import ModelRegistry\n\n\ndef register_all():\n"
    "    ModelRegistry.register_model('OutsideMTP', 'other_pkg.m:OutsideMTP')\n",
}


def test_a_plugins_entry_points_are_followed_into_its_own_packages_only(tmp_path: Path) -> None:
    from mtp_audit.resolve.plugins import read_plugin

    for rel, text in PLUGIN_FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    entry_points = (
        (GENERAL, "beta", "beta:register"),
        (GENERAL, "missing", "beta.absent:register"),
        (GENERAL, "nofunc", "beta.impl:nope [extra]"),
        (PLATFORM, "beta_p", "beta.platform:activate"),
        (PLATFORM, "beta_t", "beta.platform:typed"),
        (PLATFORM, "beta_u", "beta.platform:unnamed"),
        (PLATFORM, "beta_n", "beta.platform:nothing"),
    )
    plugin = PluginDist("beta", "0.1", tmp_path, entry_points)
    reading = read_plugin(ModuleIndex(SourceTree(tmp_path, None, None)), plugin)
    # register is re-exported by the package; helper is in the same module, deeper in another of
    # the plugin's modules; other_pkg is not the plugin's, so its registration is not followed
    assert [(r.arch, r.module, r.cls, r.group, r.file, r.line) for r in reading.registrations] == [
        ("HelperMTP", "beta.m", "HelperMTP", GENERAL, "beta/impl.py", 13),
        ("DeeperMTP", "beta.m", "DeeperMTP", GENERAL, "beta/more.py", 5),
    ]
    # a platform's device_name, else its device_type, else the entry point's name
    assert reading.platforms == ["beta_n", "beta_npu", "beta_typed", "beta_u"]
    assert reading.skipped == [
        # other_pkg registers models, and is not the plugin's: said, not followed
        "other_pkg/__init__.py: other_pkg.register_all() is called, but other_pkg is not a package of beta 0.1 "
        "(its entry points' or its top_level.txt's): not followed",
    ]
    assert reading.notes == [
        "plugin beta 0.1: entry point missing (beta.absent:register) fails to import, so vLLM never calls it "
        "and its registrations do not apply: no module beta.absent in the plugin",
        "plugin beta 0.1: entry point nofunc (beta.impl:nope [extra]) names no function of beta/impl.py, so "
        "loading it raises AttributeError: vLLM never calls it and its registrations do not apply",
    ]


def test_dicts_imported_from_sibling_modules_are_read_as_they_build_them(tmp_path: Path) -> None:
    from mtp_audit.resolve.registry import registry_reading

    models = tmp_path / "vllm/model_executor/models"
    models.mkdir(parents=True)
    (models / "_names.py").write_text('TOY = "ToyMTP"\n')
    (models / "_spec.py").write_text(
        "from ._names import TOY\n"
        "from .registry import _LOOP\n"  # a cycle: nothing from it
        f'{SPEC} = {{TOY: ("m", "Toy")}}\n'
        f'{SPEC}.pop("GoneMTP")\n'
    )
    (models / "registry.py").write_text(
        f"from vllm.model_executor.models._spec import {SPEC}\n"
        f'{SPEC}["BMTP"] = ("m", "B")\n'
        '_LATE = {"ToyMTP": ("other", "Replacing")}\n'
        f"_VLLM_MODELS = {{**{SPEC}, **_LATE}}\n"
        "_LOOP = {}\n"
    )
    entries, warnings = registry_reading(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert [(e.arch, e.module, e.cls, e.registry) for e in entries] == [
        ("ToyMTP", "vllm.model_executor.models.other", "Replacing", "_LATE"),  # what ModelRegistry holds
        ("BMTP", "vllm.model_executor.models.m", "B", SPEC),
    ]
    assert warnings == [
        f"vllm/model_executor/models/_spec.py:4: `{SPEC}.pop('GoneMTP')`: a change mtp-audit does not follow; "
        f"{SPEC} may hold drafters mtp-audit does not see"
    ]


def test_model_registry_membership_decides_what_is_a_drafter(tmp_path: Path) -> None:
    """vLLM's ModelRegistry is built from _VLLM_MODELS: read whole, an entry outside it is never loaded (said, not
    reported); a drafter whose winning value is no readable pair is said, not dropped unsaid; a dict merged after
    the speculative one that cannot be read may replace its classes (said)."""
    from mtp_audit.resolve.registry import registry_reading

    path = tmp_path / REGISTRY
    path.parent.mkdir(parents=True)
    path.write_text(
        f'{SPEC} = {{"AMTP": ("m", "A"), "FnMTP": ("m", "F")}}\n'
        f'_BACKEND = {{"FnMTP": make_pair("F2"), "TransformersMTP": make_pair("T")}}\n'
        f"_VLLM_MODELS = {{**{SPEC}, **_BACKEND}}\n"
        f'{SPEC}["LateMTP"] = ("m", "L")\n'
        f"_MAYBE = {{**{SPEC}, **make()}}\n"
    )
    entries, warnings = registry_reading(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert [(e.arch, e.cls, e.registry) for e in entries] == [("AMTP", "A", SPEC)]
    assert warnings == [
        f"{REGISTRY}:2: _BACKEND['FnMTP']: `make_pair('F2')` is not a (module, class) string pair mtp-audit can "
        "read; this drafter is not audited",
        f"{SPEC}['LateMTP'] is not in _VLLM_MODELS, which vLLM's ModelRegistry is built from: not a drafter vLLM loads",
        f"{REGISTRY}:2: _BACKEND['TransformersMTP']: `make_pair('T')` is not a (module, class) string pair "
        "mtp-audit can read; this drafter is not audited",
    ]
    path.write_text(path.read_text().replace("**_BACKEND}", "**_BACKEND, **make()}"))
    entries, warnings = registry_reading(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert [e.arch for e in entries] == ["AMTP", "LateMTP"]  # _VLLM_MODELS not read whole: kept
    assert f"{REGISTRY}:3: `**make()`: not a dict literal" in warnings[0]
    assert warnings[0].endswith("_VLLM_MODELS may give a drafter another class than mtp-audit sees")


def test_a_package_registry_sibling_imports_relative_to_itself(tmp_path: Path) -> None:
    """``from .mtp import X`` in ``spec/__init__.py`` is ``spec.mtp``, not a module beside the package."""
    from mtp_audit.resolve.registry import registry_reading

    models = tmp_path / "vllm/model_executor/models"
    (models / "spec").mkdir(parents=True)
    (models / "mtp.py").write_text(f'{SPEC} = {{"WrongMTP": ("m", "Wrong")}}\n')
    (models / "spec/mtp.py").write_text(f'{SPEC} = {{"RightMTP": ("m", "Right")}}\n')
    (models / "spec/__init__.py").write_text(f"from .mtp import {SPEC}\n")
    (models / "registry.py").write_text(f"from .spec import {SPEC}\n")
    entries, _ = registry_reading(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert [e.arch for e in entries] == ["RightMTP"]


def test_names_bound_in_a_class_body_are_the_classs(tmp_path: Path) -> None:
    """A class attribute named like a registry dict neither rebinds nor changes the module's (review)."""
    from mtp_audit.resolve.registry import registry_reading

    path = tmp_path / REGISTRY
    path.parent.mkdir(parents=True)
    path.write_text(f'{SPEC} = {{"AMTP": ("m", "A")}}\n\n\nclass _Holder:\n    {SPEC}: dict = {{}}\n')
    entries, warnings = registry_reading(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert ([e.arch for e in entries], warnings) == (["AMTP"], [])


def test_a_sibling_whose_top_level_changes_a_dict_runs_when_imported(tmp_path: Path) -> None:
    """Imported names are read when used; a module of the registry's package that changes a dict at its top level
    runs at its import, as in Python, even when nothing it binds is used (review: lazy reading missed it)."""
    from mtp_audit.resolve.registry import registry_reading

    models = tmp_path / "vllm/model_executor/models"
    models.mkdir(parents=True)
    (models / "_spec.py").write_text('_SPEC_BASE = {"AMTP": ("m", "A")}\n')
    (models / "_extra.py").write_text('from ._spec import _SPEC_BASE\n_SPEC_BASE["BMTP"] = ("m", "B")\n')
    (models / "_back.py").write_text(f'from .registry import {SPEC}\n{SPEC}["CMTP"] = ("m", "C")\nDONE = 1\n')
    (models / "registry.py").write_text(
        f"from ._spec import _SPEC_BASE\nfrom . import _extra\n{SPEC} = {{**_SPEC_BASE}}\nfrom ._back import DONE\n"
    )
    entries, warnings = registry_reading(ModuleIndex(SourceTree(tmp_path, tmp_path / "vllm", None)))
    assert ([e.arch for e in entries], warnings) == (["AMTP", "BMTP", "CMTP"], [])
