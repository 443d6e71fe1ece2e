"""Reading a plugin's code statically: which functions its entry points reach, the names its
modules bind (in ``if``/``try``/``with`` blocks, relative imports of one or two levels, ``import a.b
as c``), how deep helper chains are followed, its platforms' device names, and a plugin source tree
that declares its own entry points. Each plugin is a small package of our own, read in process."""

from __future__ import annotations

import locale
import textwrap
from pathlib import Path

from mtp_audit.index.modules import ModuleIndex
from mtp_audit.model import PLATFORMS, PluginDist, RegistryEntry, SourceTree
from mtp_audit.resolve.plugins import (
    GENERAL,
    MAX_CALL_DEPTH,
    PLATFORM,
    REGISTERED,
    PluginReading,
    Registration,
    effective_registry,
    plugin_tree_entries,
    read_plugin,
    registrations_in,
    tree_plugin,
)
from mtp_audit.resolve.registry import heuristic_entries


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else textwrap.dedent(text).encode())
    return root


def index_of(root: Path) -> ModuleIndex:
    return ModuleIndex(SourceTree(root, None, None))


def register_function(name: str, arch: str) -> str:
    return f"def {name}():\n    ModelRegistry.register_model({arch!r}, 'gamma.m:{arch}')\n\n\n"


# Every block a module-level name can be bound in; the register function calls each name once.
BLOCK_NAMES = ("in_if", "in_else", "in_try", "in_handler", "in_try_else", "in_finally", "in_with")


def block_arch(name: str) -> str:
    return f"{name.title().replace('_', '')}MTPModel"


GAMMA = {
    "gamma/__init__.py": """\
        import sys

        from vllm import ModelRegistry

        if sys.platform == "win32":
            from .impl import in_if
        else:
            from .impl import in_else
        try:
            from .impl import in_try
        except ImportError:
            from .impl import in_handler
        else:
            from .impl import in_try_else
        finally:
            from .impl import in_finally
        with open(__file__):
            from .impl import in_with
        from . import helpers
        from . import models
        from .models import RelativeMTP
        from .sub import deep
        import gamma.tools.extra as extra
        import gamma.models as aliased_models
        import gamma.tools


        class LocalMTP:
            from .impl import in_class


        def loader():
            from .impl import in_function


        def register():
            from . import helpers as local_helpers
            from . import models as local_models

            in_if(); in_else(); in_try(); in_handler(); in_try_else(); in_finally(); in_with()
            in_class(); in_function()
            helpers.run()
            local_helpers.run_local()
            extra.run()
            gamma.package_helper()
            gamma.tools.extra.run_unfollowed()
            deep.run()
            ModelRegistry.register_model("LocalMTPModel", LocalMTP)
            ModelRegistry.register_model("RelativeMTPModel", RelativeMTP)
            ModelRegistry.register_model("AttrMTPModel", models.AttrMTP)
            ModelRegistry.register_model("AliasedMTPModel", aliased_models.AliasedMTP)
            ModelRegistry.register_model("LocalAttrMTPModel", local_models.LocalAttrMTP)
            ModelRegistry.register_model("OnlyAnArch")
            registry_factory().register_model("FactoryMTPModel", "gamma.m:FactoryMTP")


        def package_helper():
            ModelRegistry.register_model("PackageMTPModel", "gamma.m:PackageMTP")
        """,
    "gamma/entry.py": """\
        from . import register


        def platform():
            return "gamma.platform.GammaPlatform"


        def elsewhere():
            return "gamma.nowhere.Platform"
        """,
    "gamma/impl.py": "from vllm import ModelRegistry\n\n\n"
    + "".join(register_function(name, block_arch(name)) for name in BLOCK_NAMES)
    + register_function("in_class", "ClassLevelMTPModel")
    + register_function("in_function", "FunctionLevelMTPModel")
    + register_function("via_parent", "ViaParentMTPModel"),
    "gamma/helpers.py": "from vllm import ModelRegistry\n\n\n"
    + register_function("run", "HelpersMTPModel")
    + register_function("run_local", "LocalHelpersMTPModel"),
    "gamma/models.py": "class RelativeMTP: ...\nclass AttrMTP: ...\nclass AliasedMTP: ...\nclass LocalAttrMTP: ...\n",
    "gamma/tools/__init__.py": "from .extra import reexported\n",
    "gamma/tools/extra.py": "from vllm import ModelRegistry\n\n\n"
    + register_function("run", "ExtraMTPModel")
    + register_function("run_unfollowed", "UnfollowedMTPModel")
    + register_function("reexported", "ReexportedMTPModel"),
    "gamma/sub/__init__.py": "",
    "gamma/sub/deep.py": "from ..impl import via_parent\n\n\ndef run():\n    via_parent()\n",
    "gamma/platform.py": """\
        class GammaPlatform:
            _enum = "OOT"
            dispatch_key: str = "PrivateUse1"
            device_name: str = "gamma"
            device_type: str = "gamma_type"
        """,
}


def test_a_package_plugin_bound_through_blocks_and_relative_imports(tmp_path: Path) -> None:
    write_files(tmp_path, GAMMA)
    # every entry point names a module inside the package (gamma.entry), none the package itself
    entry_points = (
        (GENERAL, "gamma", "gamma.entry:register"),
        (GENERAL, "tools", "gamma.tools:reexported"),  # a package re-exporting from its own module
        (PLATFORM, "gamma_p", "gamma.entry:platform[extra]"),  # extras without a space
        (PLATFORM, "gone", "gamma.gone:activate"),
        (PLATFORM, "nofunc", "gamma.entry:absent"),
        (PLATFORM, "elsewhere", "gamma.entry:elsewhere"),
    )
    plugin = PluginDist("gamma", "1.0", tmp_path, entry_points)
    reading = read_plugin(index_of(tmp_path), plugin)
    init = "gamma/__init__.py"
    assert [(r.arch, r.module, r.cls, r.file) for r in reading.registrations] == [
        # register is re-exported into gamma.entry by `from . import register`
        *((block_arch(n), "gamma.m", block_arch(n), "gamma/impl.py") for n in BLOCK_NAMES),
        # in_class and in_function are not bound at module level: not followed
        ("HelpersMTPModel", "gamma.m", "HelpersMTPModel", "gamma/helpers.py"),  # from . import helpers
        ("LocalHelpersMTPModel", "gamma.m", "LocalHelpersMTPModel", "gamma/helpers.py"),  # imported in the function
        ("ExtraMTPModel", "gamma.m", "ExtraMTPModel", "gamma/tools/extra.py"),  # import gamma.tools.extra as extra
        ("PackageMTPModel", "gamma.m", "PackageMTP", init),  # import gamma.tools binds gamma
        # gamma.tools.extra.run_unfollowed(): a call through two attributes is not followed
        ("ViaParentMTPModel", "gamma.m", "ViaParentMTPModel", "gamma/impl.py"),  # from ..impl in gamma.sub.deep
        ("LocalMTPModel", "gamma", "LocalMTP", init),  # a class of the package's own module
        ("RelativeMTPModel", "gamma.models", "RelativeMTP", init),
        ("AttrMTPModel", "gamma.models", "AttrMTP", init),
        ("AliasedMTPModel", "gamma.models", "AliasedMTP", init),
        ("LocalAttrMTPModel", "gamma.models", "LocalAttrMTP", init),
        ("ReexportedMTPModel", "gamma.m", "ReexportedMTPModel", "gamma/tools/extra.py"),
    ]
    assert {r.group for r in reading.registrations} == {GENERAL}
    # the device name of the class the platform function returns (an annotated class constant,
    # after others), else the entry point's name; gamma.gone and gamma.entry:absent never load, so are never platforms
    assert reading.platforms == ["elsewhere", "gamma"]
    unreadable = (
        "register_model with arguments that are not a string architecture and a 'module:Class' "
        "string or an imported class"
    )
    assert reading.skipped == [
        f"{init}:53: {unreadable}",  # an architecture and no class
        f"{init}:54: (...).register_model(...) is not followed to vLLM's ModelRegistry",
    ]
    assert reading.notes == [
        "plugin gamma 1.0: entry point gone (gamma.gone:activate) fails to import, so vLLM never calls it "
        "and its registrations do not apply: no module gamma.gone in the plugin",
        # plugin.load() raises AttributeError: vLLM logs "Failed to load plugin" and never calls it
        "plugin gamma 1.0: entry point nofunc (gamma.entry:absent) names no function of gamma/entry.py, so "
        "loading it raises AttributeError: vLLM never calls it and its registrations do not apply",
    ]


def test_helper_chains_are_followed_to_a_limit(tmp_path: Path) -> None:
    steps = MAX_CALL_DEPTH + 3
    chain = "".join(
        f"def step{k}():\n    ModelRegistry.register_model('Step{k}MTPModel', 'delta.m:Step{k}')\n"
        + (f"    step{k + 1}()\n" if k + 1 < steps else "")
        + "\n\n"
        for k in range(steps)
    )
    write_files(tmp_path, {"delta/__init__.py": "from vllm import ModelRegistry\n\n\n" + chain})
    plugin = PluginDist("delta", "1.0", tmp_path, ((GENERAL, "delta", "delta:step0"),))
    reading = read_plugin(index_of(tmp_path), plugin)
    # the entry point's function is depth 0; a function at MAX_CALL_DEPTH still registers, its calls are not followed
    assert [r.arch for r in reading.registrations] == [f"Step{k}MTPModel" for k in range(MAX_CALL_DEPTH + 1)]
    assert reading.skipped == []


def test_a_re_export_cycle_ends(tmp_path: Path) -> None:
    # a cycle vLLM would fail to import; the reading must still end, and read the plugin's other entry point
    write_files(
        tmp_path,
        {
            "cyc/__init__.py": "from cyc.a import register\n",
            "cyc/a.py": "from cyc import register\n",
            "cyc/ok.py": "from vllm import ModelRegistry\n\n\n"
            "def register():\n    ModelRegistry.register_model('OkMTPModel', 'cyc.m:OkMTP')\n",
        },
    )
    entry_points = ((GENERAL, "cycle", "cyc:register"), (GENERAL, "ok", "cyc.ok:register"))
    reading = read_plugin(index_of(tmp_path), PluginDist("cyc", "1.0", tmp_path, entry_points))
    assert [(r.arch, r.cls) for r in reading.registrations] == [("OkMTPModel", "OkMTP")]


def test_registrations_anywhere_in_a_package_after_a_module_that_cannot_be_read(tmp_path: Path) -> None:
    write_files(
        tmp_path,
        {
            "pkg/broken.py": "def f(:\n",
            "pkg/__init__.py": """\
                from vllm import ModelRegistry
                from .models import TopMTP


                def register():
                    from .models import InnerMTP
                    ModelRegistry.register_model("InnerMTPModel", InnerMTP)


                ModelRegistry.register_model("TopMTPModel", TopMTP)
                """,
        },
    )
    plugin = PluginDist("pkg", "1.0", tmp_path, ())
    reading = registrations_in(index_of(tmp_path), ["pkg.absent", "pkg.broken", "pkg"], plugin)
    # relative imports of a package's __init__ are relative to the package itself
    assert [(r.arch, r.module, r.cls, r.line) for r in reading.registrations] == [
        ("InnerMTPModel", "pkg.models", "InnerMTP", 7),
        ("TopMTPModel", "pkg.models", "TopMTP", 10),
    ]
    assert reading.skipped == ["pkg/broken.py: cannot parse (invalid syntax (<unknown>, line 1))"]


EPS = {
    "eps-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: eps\nVersion: 1.0\n",
    "eps-1.0.dist-info/entry_points.txt": (
        "[vllm.general_plugins]\neps = eps:register\n\n[vllm.platform_plugins]\neps_npu = eps:platform\n"
    ),
    "eps/__init__.py": """\
        from vllm import ModelRegistry


        def register():
            ModelRegistry.register_model("DeepSeekMTPModel", "eps.mtp:EpsMTP")
            ModelRegistry.register_model("EpsForCausalLM", "eps.draft_target:EpsForCausalLM")


        def platform():
            ModelRegistry.register_model("ToyMTPModel", "eps.npu_mtp:NpuToyMTP")
            return "eps.platform.EpsPlatform"
        """,
    "eps/platform.py": "class EpsPlatform:\n    device_name = 'eps'\n",
    "eps/unreached.py": "from vllm import ModelRegistry\n\n"
    "ModelRegistry.register_model('UnreachedMTPModel', 'eps.unreached:UnreachedMTP')\n\n\nclass UnreachedMTP: ...\n",
    # a drafter-named file that a (non-drafter) registration names: its classes are not guessed at
    "eps/draft_target.py": "class EpsForCausalLM: ...\n\n\nclass EpsDraftModel: ...\n",
    "eps/spare_mtp.py": "class SpareMTP: ...\n",
}


def test_a_plugin_source_tree_that_declares_its_entry_points(tmp_path: Path) -> None:
    root = write_files(tmp_path / "eps-src", EPS)
    in_tree = [
        RegistryEntry("DeepSeekMTPModel", "vllm.models.deepseek_mtp", "DeepSeekMTP", "_SPECULATIVE_DECODING_MODELS"),
        RegistryEntry("ToyMTPModel", "vllm.models.toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS"),
    ]
    index = index_of(root)
    entries, skipped = plugin_tree_entries(index, in_tree, heuristic_entries(index))
    everywhere = (*PLATFORMS, "eps")
    assert entries == [
        # the platform plugin's registration applies on its own platform only
        RegistryEntry(
            "ToyMTPModel",
            "eps.npu_mtp",
            "NpuToyMTP",
            REGISTERED,
            "eps 1.0",
            ("vllm.models.toy_mtp", "ToyMTP"),
            ("eps",),
        ),
        RegistryEntry(
            "DeepSeekMTPModel",
            "eps.mtp",
            "EpsMTP",
            REGISTERED,
            "eps 1.0",
            ("vllm.models.deepseek_mtp", "DeepSeekMTP"),
            everywhere,
        ),
        # reached from no entry point: a general plugin's, once
        RegistryEntry("UnreachedMTPModel", "eps.unreached", "UnreachedMTP", REGISTERED, "eps 1.0", None, everywhere),
        RegistryEntry(None, "eps.spare_mtp", "SpareMTP", "heuristic"),
    ]
    assert skipped == []


def test_registrations_over_other_plugins_registrations() -> None:
    deepseek = RegistryEntry(
        "DeepSeekMTPModel", "vllm.models.deepseek_mtp", "DeepSeekMTP", "_SPECULATIVE_DECODING_MODELS"
    )
    wide, narrow, general = (PluginDist(name, "1.0", Path("/site"), ()) for name in ("wide", "narrow", "general"))

    def reading(plugin: PluginDist, group: str, platforms: list[str], *registered: tuple[str, str, str]):
        registrations = [Registration(*r, plugin, group, "reg.py", line) for line, r in enumerate(registered, 1)]
        return PluginReading(registrations, platforms, [])

    readings = [
        # a platform plugin of two devices: a new drafter, and vLLM's DeepSeekMTP replaced
        reading(
            wide,
            PLATFORM,
            ["npu", "npu2"],
            ("NewMTPModel", "wide.new", "WideNew"),
            ("DeepSeekMTPModel", "wide.ds", "WideDS"),
        ),
        # another, on one of those devices
        reading(narrow, PLATFORM, ["npu2"], ("DeepSeekMTPModel", "narrow.ds", "NarrowDS")),
        # a general plugin registering the architecture that only a plugin registered before
        reading(general, GENERAL, [], ("NewMTPModel", "general.new", "GeneralNew")),
    ]
    in_tree = (deepseek.module, deepseek.cls)
    everywhere = (*PLATFORMS, "npu", "npu2")
    assert effective_registry([deepseek], readings) == [
        deepseek,  # on every in-tree platform
        # what the wide plugin replaced stays what it replaces on the device it keeps
        RegistryEntry("DeepSeekMTPModel", "wide.ds", "WideDS", REGISTERED, "wide 1.0", in_tree, ("npu",)),
        RegistryEntry("DeepSeekMTPModel", "narrow.ds", "NarrowDS", REGISTERED, "narrow 1.0", in_tree, ("npu2",)),
        # no in-tree entry: it replaces the plugin's
        RegistryEntry(
            "NewMTPModel", "general.new", "GeneralNew", REGISTERED, "general 1.0", ("wide.new", "WideNew"), everywhere
        ),
    ]


def test_a_pyproject_is_read_as_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    write_files(tmp_path, {"pyproject.toml": '[project]\nname = "cafe"\nversion = "1"\ndescription = "caf\u00e9"\n'})
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: the default text encoding cannot read it
    try:
        plugin = tree_plugin(tmp_path)
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert (plugin.name, plugin.version) == ("cafe", "1")


def test_a_later_import_of_a_name_replaces_an_earlier_one(tmp_path: Path) -> None:
    """As when the module runs: the unconditional import after the ``if`` block binds the name."""
    write_files(
        tmp_path,
        {
            "eta/__init__.py": """\
                import sys

                if sys.version_info < (3, 10):
                    from .legacy import register
                try:
                    from .fast import helper
                except ImportError:
                    helper = None
                from .current import register
                """,
            "eta/legacy.py": "from vllm import ModelRegistry\n\n\n" + register_function("register", "LegacyMTPModel"),
            "eta/current.py": "from vllm import ModelRegistry\n\n\n" + register_function("register", "CurrentMTPModel"),
        },
    )
    reading = read_plugin(index_of(tmp_path), PluginDist("eta", "1.0", tmp_path, ((GENERAL, "eta", "eta:register"),)))
    assert [(r.arch, r.file) for r in reading.registrations] == [("CurrentMTPModel", "eta/current.py")]


ZETA = {
    "zeta/__init__.py": """\
        from typing import TYPE_CHECKING

        from vllm import ModelRegistry
        from vllm.platforms import current_platform

        from . import helpers


        def register():
            if current_platform.is_rocm():
                ModelRegistry.register_model("IfMTPModel", "zeta.m:RocmIf")
            else:
                ModelRegistry.register_model("IfMTPModel", "zeta.m:OtherIf")
            if current_platform.device_type == "cuda" and not current_platform.is_rocm():
                ModelRegistry.register_model("NvidiaMTPModel", "zeta.m:Nvidia")
            if current_platform.is_out_of_tree():
                ModelRegistry.register_model("OotMTPModel", "zeta.m:Oot")
            if TYPE_CHECKING:
                ModelRegistry.register_model("NeverMTPModel", "zeta.m:Never")
            for _ in range(1):
                try:
                    if current_platform.is_xpu():
                        ModelRegistry.register_model("NestedMTPModel", "zeta.m:XpuNested")
                except ImportError:
                    pass
            if current_platform.is_tpu():
                helpers.on_tpu()
            if not current_platform.is_cpu():
                raise RuntimeError("zeta runs on CPUs")
            ModelRegistry.register_model("CpuMTPModel", "zeta.m:CpuOnly")
        """,
    "zeta/helpers.py": """\
        from vllm import ModelRegistry


        def on_tpu():
            ModelRegistry.register_model("HelperMTPModel", "zeta.m:TpuHelper")
        """,
    "zeta/platform.py": "def activate():\n    return 'zeta.platform.Npu'\n\n\nclass Npu:\n    device_name = 'npu'\n",
}


def test_platform_conditions_around_registrations(tmp_path: Path) -> None:
    """Each call applies where the conditions around it (and around the calls leading to it, and an
    earlier ``if`` that raises) hold; on a plugin's platform only ``is_out_of_tree()`` is true."""
    root = write_files(tmp_path, ZETA)
    points = ((GENERAL, "zeta", "zeta:register"), (PLATFORM, "zeta_npu", "zeta.platform:activate"))
    plugin = PluginDist("zeta", "1.0", root, points)
    reading = read_plugin(index_of(root), plugin)
    assert reading.platforms == ["npu"]
    entries = effective_registry([], [reading])
    assert sorted((e.arch, e.cls, e.scope) for e in entries) == [
        ("CpuMTPModel", "CpuOnly", ("cpu",)),
        ("HelperMTPModel", "TpuHelper", ("tpu",)),
        ("IfMTPModel", "OtherIf", ("cpu", "cuda", "tpu", "xpu", "npu")),
        ("IfMTPModel", "RocmIf", ("rocm",)),
        ("NestedMTPModel", "XpuNested", ("xpu",)),
        ("NvidiaMTPModel", "Nvidia", ("cuda", "npu")),  # a plugin platform's device_type is not known
        ("OotMTPModel", "Oot", ("npu",)),
    ]


def test_an_undecided_condition_keeps_both_the_registration_and_what_it_replaces(tmp_path: Path) -> None:
    """In a plugin source tree too (every register_model call, module level included)."""
    root = write_files(
        tmp_path,
        {
            "eta/__init__.py": """\
                import os

                from vllm import ModelRegistry
                from vllm.platforms import current_platform

                if os.environ.get("ETA_FAST"):
                    ModelRegistry.register_model("ToyMTPModel", "eta.m:FastToy")
                if current_platform.is_cuda():
                    ModelRegistry.register_model("DeepSeekMTPModel", "eta.m:CudaDeepSeek")
                """,
        },
    )
    in_tree = [
        RegistryEntry("DeepSeekMTPModel", "vllm.models.deepseek_mtp", "DeepSeekMTP", "_SPECULATIVE_DECODING_MODELS"),
        RegistryEntry("ToyMTPModel", "vllm.models.toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS"),
    ]
    reading = registrations_in(index_of(root), ["eta"], PluginDist("eta", "1.0", root, ()))
    assert sorted((e.arch, e.cls, e.scope) for e in effective_registry(in_tree, [reading])) == [
        ("DeepSeekMTPModel", "CudaDeepSeek", ("cuda",)),
        ("DeepSeekMTPModel", "DeepSeekMTP", ("cpu", "rocm", "tpu", "xpu")),
        ("ToyMTPModel", "FastToy", PLATFORMS),
        ("ToyMTPModel", "ToyMTP", None),  # every platform still: ETA_FAST may be unset
    ]


def test_platform_conditions_read_names_as_dispatch_does(tmp_path: Path) -> None:
    """``current_platform`` under another name, and module-level flags bound to a platform check,
    decided by the dispatch interpreter's bindings of the plugin's module, as in vLLM's own modules."""
    root = write_files(
        tmp_path,
        {
            "theta/__init__.py": """\
                from vllm import ModelRegistry
                from vllm.platforms import current_platform as cp

                _IS_ROCM = cp.is_rocm()
                _ON_XPU = cp.is_xpu()


                def register():
                    if cp.is_cuda():
                        ModelRegistry.register_model("AliasMTPModel", "theta.m:CudaAlias")
                    if _IS_ROCM:
                        ModelRegistry.register_model("FlagMTPModel", "theta.m:RocmFlag")
                    from vllm.platforms import current_platform as local_cp

                    if not _ON_XPU and local_cp.is_tpu():
                        ModelRegistry.register_model("LocalMTPModel", "theta.m:TpuLocal")
                """,
            "theta/platform.py": ZETA["zeta/platform.py"].replace("zeta", "theta"),
        },
    )
    points = ((GENERAL, "theta", "theta:register"), (PLATFORM, "theta_npu", "theta.platform:activate"))
    reading = read_plugin(index_of(root), PluginDist("theta", "1.0", root, points))
    assert sorted((e.arch, e.cls, e.scope) for e in effective_registry([], [reading])) == [
        ("AliasMTPModel", "CudaAlias", ("cuda",)),  # an alias: decided on the plugin's platform too
        ("FlagMTPModel", "RocmFlag", ("rocm", "npu")),  # a flag: the interpreter does not run on npu
        ("LocalMTPModel", "TpuLocal", ("tpu",)),
    ]


def test_registry_aliases_are_followed_and_other_receivers_warned(tmp_path: Path) -> None:
    root = write_files(
        tmp_path,
        {
            "iota/__init__.py": """\
                import vllm
                from vllm import ModelRegistry as registry
                from vllm.model_executor.models import ModelRegistry as models_registry


                def register():
                    from vllm.model_executor.models.registry import ModelRegistry as local_registry

                    registry.register_model("AliasMTPModel", "iota.m:Alias")
                    vllm.ModelRegistry.register_model("DottedMTPModel", "iota.m:Dotted")
                    models_registry.register_model("ModelsMTPModel", "iota.m:Models")
                    local_registry.register_model("LocalMTPModel", "iota.m:Local")
                    make_registry().register_model("MadeMTPModel", "iota.m:Made")
                    some.registry.register_model("SomeMTPModel", "iota.m:Some")
                """,
        },
    )
    reading = read_plugin(index_of(root), PluginDist("iota", "1.0", root, ((GENERAL, "iota", "iota:register"),)))
    assert [r.cls for r in reading.registrations] == ["Alias", "Dotted", "Models", "Local"]
    assert reading.skipped == [
        "iota/__init__.py:13: (...).register_model(...) is not followed to vLLM's ModelRegistry",
        "iota/__init__.py:14: some.registry.register_model(...) is not followed to vLLM's ModelRegistry",
    ]


def test_a_nested_function_registers_only_when_called(tmp_path: Path) -> None:
    root = write_files(
        tmp_path,
        {
            "kappa/__init__.py": """\
                from vllm import ModelRegistry


                def register():
                    def _never():
                        ModelRegistry.register_model("NeverMTPModel", "kappa.m:Never")

                    def _called():
                        ModelRegistry.register_model("CalledMTPModel", "kappa.m:Called")

                    _called()
                    return _never
                """,
        },
    )
    reading = read_plugin(index_of(root), PluginDist("kappa", "1.0", root, ((GENERAL, "k", "kappa:register"),)))
    assert [r.arch for r in reading.registrations] == ["CalledMTPModel"]


def test_a_registration_in_an_except_block_may_or_may_not_run(tmp_path: Path) -> None:
    """Whether the ``try`` body raises is not decided: the handler's registration and the body's are both
    kept, until a later call replaces them both (on ROCm)."""
    root = write_files(
        tmp_path,
        {
            "lam/__init__.py": """\
                from vllm import ModelRegistry
                from vllm.platforms import current_platform


                def register():
                    try:
                        from .fast import FastToy

                        ModelRegistry.register_model("ToyMTPModel", FastToy)
                    except ImportError:
                        ModelRegistry.register_model("ToyMTPModel", "lam.slow:SlowToy")
                    if current_platform.is_rocm():
                        ModelRegistry.register_model("ToyMTPModel", "lam.rocm:RocmToy")
                """,
        },
    )
    reading = read_plugin(index_of(root), PluginDist("lam", "1.0", root, ((GENERAL, "lam", "lam:register"),)))
    toy = RegistryEntry("ToyMTPModel", "vllm.models.toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS")
    elsewhere = ("cpu", "cuda", "tpu", "xpu")
    assert sorted((e.cls, e.scope) for e in effective_registry([toy], [reading])) == [
        ("FastToy", elsewhere),
        ("RocmToy", ("rocm",)),
        ("SlowToy", elsewhere),
    ]


def test_a_registration_replaces_vllms_entry_also_after_another_plugins() -> None:
    toy = RegistryEntry("ToyMTPModel", "vllm.models.toy_mtp", "ToyMTP", "_SPECULATIVE_DECODING_MODELS")
    readings = [
        PluginReading([Registration("ToyMTPModel", f"{name}.m", name, plugin, GENERAL, "r.py", 1)], [], [])
        for name, plugin in (("A", PluginDist("a", "1", Path("/s"), ())), ("B", PluginDist("b", "1", Path("/s"), ())))
    ]
    assert [(e.cls, e.replaces) for e in effective_registry([toy], readings)] == [("B", (toy.module, toy.cls))]


def test_a_module_without_a_py_file_is_not_taken_for_a_failed_import(tmp_path: Path) -> None:
    """A namespace package (no ``__init__.py``) or a compiled extension imports; only a module nothing in
    the tree can be, or one that does not parse, makes the entry point fail."""
    from mtp_audit.resolve.plugins import read_plugins

    write_files(
        tmp_path,
        {
            "acme/vplug/__init__.py": """
                from vllm import ModelRegistry
                from acme.vplug._C import ops
                def register():
                    ModelRegistry.register_model("AcmeMTPModel", "acme.vplug.model:AcmeMTP")
                """,
            "acme/vplug/_C.cpython-311-x86_64-linux-gnu.so": b"",
        },
    )
    plugin = PluginDist("acme", "1", tmp_path, ((GENERAL, "acme", "acme.vplug:register"),))
    (reading,) = read_plugins(index_of(tmp_path), (plugin,))
    assert [(r.arch, r.cls) for r in reading.registrations] == [("AcmeMTPModel", "AcmeMTP")]
    assert not reading.failed and reading.notes == []


def test_one_entry_point_may_call_into_another_entry_points_package(tmp_path: Path) -> None:
    """The distribution's code is every package its entry points name, also read one entry point at a time."""
    from mtp_audit.resolve.plugins import read_plugins

    write_files(
        tmp_path,
        {
            "pkga/__init__.py": "from pkgb.helpers import reg\ndef register():\n    reg()\n",
            "pkgb/__init__.py": "",
            "pkgb/helpers.py": """
                from vllm import ModelRegistry
                def reg():
                    ModelRegistry.register_model("OtherMTPModel", "pkgb.model:OtherMTP")
                def plat():
                    return "pkgb.platform:P"
                """,
        },
    )
    plugin = PluginDist("two", "1", tmp_path, ((GENERAL, "a", "pkga:register"), (PLATFORM, "b", "pkgb.helpers:plat")))
    readings = read_plugins(index_of(tmp_path), (plugin,))
    assert [r.arch for reading in readings for r in reading.registrations] == ["OtherMTPModel"]


def test_an_architecture_in_two_in_tree_dicts_keeps_both_where_no_plugin_replaces_it() -> None:
    drafter = RegistryEntry("FooMTPModel", "vllm.a", "FooMTP", "_SPECULATIVE_DECODING_MODELS")
    other = RegistryEntry("FooMTPModel", "vllm.b", "FooMTP2", "_TRANSFORMERS_BACKEND_MODELS")
    plugin = PluginDist("npuplug", "1", Path("/x"), ())
    scoped = Registration("FooMTPModel", "npuplug.m", "NpuMTP", plugin, PLATFORM, "m.py", 3, ())
    entries = effective_registry([drafter, other], [PluginReading([scoped], ["npu"], [])])
    assert {(e.module, e.cls) for e in entries} >= {
        ("vllm.a", "FooMTP"),
        ("vllm.b", "FooMTP2"),
        ("npuplug.m", "NpuMTP"),
    }


def test_registrations_run_by_importing_the_plugins_modules_count(tmp_path: Path) -> None:
    """``plugin.load()`` imports the entry point's module (its packages first) before vLLM calls any function: a
    ``register_model`` at the top level of a module of the plugin runs then, and so does one in a module a function
    imports (``import``, ``importlib.import_module``) where the import stands; each module once."""
    from mtp_audit.resolve.plugins import read_plugins

    write_files(
        tmp_path,
        {
            "acme/__init__.py": """
                from vllm import ModelRegistry
                ModelRegistry.register_model("PackageMTPModel", "acme.models:PackageMTP")
                try:
                    import acme.tried
                except ImportError:
                    pass
                """,
            "acme/tried.py": """
                from vllm import ModelRegistry
                ModelRegistry.register_model("TriedMTPModel", "acme.models:TriedMTP")
                """,
            "acme/after.py": """
                from vllm import ModelRegistry
                ModelRegistry.register_model("AfterMTPModel", "acme.models:AfterMTP")
                """,
            "acme/typed.py": """
                from vllm import ModelRegistry
                ModelRegistry.register_model("TypedMTPModel", "acme.models:TypedMTP")
                """,
            "acme/entry.py": """
                import importlib
                from vllm import ModelRegistry
                from acme import shared
                ModelRegistry.register_model("TopLevelMTPModel", "acme.models:TopLevelMTP")
                from typing import TYPE_CHECKING
                def register():
                    import acme.late
                    importlib.import_module("acme.later")
                    from acme import shared
                    ModelRegistry.register_model("CalledMTPModel", "acme.models:CalledMTP")
                    if TYPE_CHECKING:
                        import acme.typed
                    import acme.after
                """,
            "acme/shared.py": """
                from vllm import ModelRegistry
                ModelRegistry.register_model("SharedMTPModel", "acme.models:SharedMTP")
                """,
            "acme/late.py": """
                from vllm import ModelRegistry
                ModelRegistry.register_model("LateMTPModel", "acme.models:LateMTP")
                """,
            "acme/later.py": """
                from vllm import ModelRegistry
                def _register():
                    ModelRegistry.register_model("LaterMTPModel", "acme.models:LaterMTP")
                _register()
                """,
        },
    )
    plugin = PluginDist("acme", "1", tmp_path, ((GENERAL, "acme", "acme.entry:register"),))
    readings = read_plugins(index_of(tmp_path), (plugin,))
    registrations = [r for reading in readings for r in reading.registrations]
    assert [r.arch for r in registrations] == [
        "PackageMTPModel",  # importing acme.entry imports acme first, its try body too
        "TriedMTPModel",
        "SharedMTPModel",  # then acme.entry's top level: its import of acme.shared, once
        "TopLevelMTPModel",
        "LateMTPModel",  # register() runs: what its imports run, where they stand
        "LaterMTPModel",
        "CalledMTPModel",
        "TypedMTPModel",  # under TYPE_CHECKING, false at run time: it applies nowhere
        "AfterMTPModel",  # an import after the last call
    ]
    typed = next(r for r in registrations if r.arch == "TypedMTPModel")
    assert [typed.applies_on(platform) for platform in PLATFORMS] == [False] * len(PLATFORMS)
    assert all(r.applies_on(platform) for r in registrations if r is not typed for platform in PLATFORMS)
