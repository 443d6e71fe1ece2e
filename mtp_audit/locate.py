"""Stage 1: find the source tree to audit, without importing vLLM."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import replace
from pathlib import Path

from .errors import UsageError
from .model import PluginDist, SourceTree

REGISTRY = Path("model_executor/models/registry.py")
REGISTRY_PACKAGE = Path("model_executor/models/registry/__init__.py")  # the registry split into a package
LOGITS_PROCESSOR = Path("model_executor/layers/logits_processor.py")
# The entry-point groups vLLM loads plugins from (see resolve/plugins.py).
GENERAL = "vllm.general_plugins"
PLATFORM = "vllm.platform_plugins"
GROUPS = (GENERAL, PLATFORM)


def registry_file(package_dir: Path) -> Path | None:
    """The file of ``vllm.model_executor.models.registry`` under a ``vllm`` package folder: its package's
    ``__init__.py`` where it is one (Python imports the package before a same-named module), else
    ``registry.py``; None when neither is there."""
    for relative in (REGISTRY_PACKAGE, REGISTRY):
        if (package_dir / relative).is_file():
            return package_dir / relative
    return None


def locate(path: Path | None) -> SourceTree:
    """Resolve PATH (a checkout, a ``vllm`` package dir, or a plugin dir)."""
    if path is None:
        cwd = Path.cwd().resolve()
        for folder in (cwd, *cwd.parents):  # the checkout the current directory is in, as git finds a repository
            if registry_file(folder / "vllm"):
                return _vllm_tree(folder)
        return _installed_vllm()
    path = path.expanduser()
    if not path.exists():
        raise UsageError(f"{path}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory; give a vLLM checkout, a vllm package or a directory of model files")
    path = path.resolve()
    if registry_file(path / "vllm"):
        return _vllm_tree(path)
    if registry_file(path) and path.name == "vllm":
        return _vllm_tree(path.parent)
    if registry_file(path):
        raise UsageError(
            f"{path}: holds vLLM's package ({REGISTRY}) under another name than vllm, and its modules are "
            "vllm.*: give a directory where it is named vllm (a copy, or a symlink named vllm in an empty folder)"
        )
    if (path / "vllm").is_dir() or path.name == "vllm":
        raise UsageError(f"{path}: looks like vLLM but has no {REGISTRY}; is the tree complete?")
    enclosing = next((folder for folder in path.parents if folder.name == "vllm" and registry_file(folder)), None)
    if enclosing is not None:  # read alone, it would be a plugin directory judged against another vLLM
        raise UsageError(
            f"{path}: is part of the vLLM package at {enclosing}, whose drafters are judged with the rest of "
            f"that tree (its registry, speculators and bases); give {enclosing.parent}, with --model to narrow it"
        )
    if not _holds_python(path):
        raise UsageError(f"{path}: no Python files here; give a vLLM checkout or a directory of model files")
    return SourceTree(root=path, package_dir=None, vllm_version=None)


def _installed_vllm() -> SourceTree:
    """The installed vllm package, as the ``mtp-audit`` script finds it: the current directory is left out of the
    search (``python -m`` puts it first on ``sys.path``), having been looked at as a checkout already."""
    import sys

    here = {"", ".", str(Path.cwd())}
    searched = sys.path[:]
    sys.path[:] = [entry for entry in searched if entry not in here]
    try:  # the import system's finders (an editable install's too) locate the package and run none of it
        spec = importlib.util.find_spec("vllm")
    finally:
        sys.path[:] = searched
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "no PATH given, the current directory is not a vLLM checkout and no "
            "vllm package is installed; pass the path of a vLLM tree"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations))).resolve()
    if not registry_file(package_dir):
        raise UsageError(f"no PATH given, and the installed vllm package ({package_dir}) has no {REGISTRY}")
    return _vllm_tree(package_dir.parent)


def _vllm_tree(root: Path) -> SourceTree:
    package_dir = root / "vllm"
    return SourceTree(root=root, package_dir=package_dir, vllm_version=read_version(root))


_VERSION_RE = re.compile(r"^Version:\s*(\S+)", re.MULTILINE)


def read_version(root: Path) -> str | None:
    """The version from ``vllm/_version.py`` or a ``vllm-*.dist-info`` beside it."""
    version_file = root / "vllm" / "_version.py"
    if version_file.is_file():
        try:
            tree = ast.parse(version_file.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, OSError):  # unreadable, not UTF-8, a null byte: no version, not an error
            tree = None
        found = None
        for node in tree.body if tree else ():
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if names & {"__version__", "version"} and isinstance(node.value.value, str):
                    found = node.value.value  # the last assignment is the one Python keeps
        if found is not None:
            return found
    for meta in sorted(root.glob("vllm-*.dist-info/METADATA")):
        match = _VERSION_RE.search(meta.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(1)
    return None


def _holds_python(root: Path) -> bool:
    """Whether any ``*.py`` file is under ``root`` (stopping at the first), a folder that cannot be listed on
    the way a usage error naming it."""
    for _, _, names in os.walk(root, onerror=_refuse_folder):
        if any(name.endswith(".py") for name in names):
            return True
    return False


def _refuse_folder(error: OSError) -> None:
    raise UsageError(f"{error.filename}: cannot be read ({error.strerror or error})")


# Folders of a plugin tree that hold no model code: never read.
SKIPPED_FOLDERS = frozenset({"__pycache__", "tests", "test"})


def tree_python_files(root: Path) -> list[Path]:
    """The ``*.py`` files of a plugin tree, sorted, as ``sorted(root.rglob("*.py"))`` finds them (symlinked folders
    not entered), hidden, ``__pycache__`` and test folders and hidden files left out. A folder that cannot be listed
    is a usage error naming it and why: its drafters would otherwise be missed unsaid."""
    found = []
    for folder, folders, names in os.walk(root, onerror=_refuse_folder):
        folders[:] = [f for f in folders if not f.startswith(".") and f not in SKIPPED_FOLDERS]
        found += [Path(folder, name) for name in names if name.endswith(".py") and not name.startswith(".")]
    return sorted(found)


def with_plugins(tree: SourceTree, plugin_paths: list[Path]) -> SourceTree:
    """``tree`` with the plugins installed beside it: in its own directory and, when that
    directory is on ``sys.path`` (the installed vLLM), in the rest of that environment; then in
    ``plugin_paths``. Their directories become extra roots for finding their modules."""
    import sys

    search = [tree.root]
    on_path = [Path(p or ".").resolve() for p in sys.path]
    if tree.root in on_path:
        search += on_path
    for path in plugin_paths:
        if not path.expanduser().is_dir():
            raise UsageError(f"--plugin-path {path}: no such directory")
    given = [p.expanduser().resolve() for p in plugin_paths]
    search += given
    plugins = tuple(discover(list(dict.fromkeys(search))))
    sites = list(dict.fromkeys(p.location for p in plugins))
    installed = [editable_installs(site) for site in sites]
    # sys.path's own order (the tree first only where it is not on it), then the given folders
    import_order = [*(on_path if tree.root in on_path else [tree.root]), *given]
    homes = plugin_homes(plugins, list(dict.fromkeys(import_order)))
    extra = [
        *(home for _, home in homes if home != tree.root),
        *(site for site in sites if site != tree.root),
        *(path for paths, _ in installed for path in paths),
    ]
    mapped = tuple(dict.fromkeys(pair for _, mapping in installed for pair in mapping))
    allowed = os.environ.get("VLLM_PLUGINS")  # vLLM's envs.VLLM_PLUGINS: only these entry points load
    return replace(
        tree,
        extra_roots=tuple(dict.fromkeys(extra)),
        plugins=plugins,
        mapped_packages=mapped,
        plugin_homes=homes,
        allowed_plugins=None if allowed is None else tuple(allowed.split(",")),
    )


def plugin_homes(plugins: tuple[PluginDist, ...], import_order: list[Path]) -> tuple[tuple[str, Path], ...]:
    """Each plugin top-level package (its ``top_level.txt`` names and its entry points' first parts) and
    the first folder in ``import_order`` holding it as ``P/__init__.py`` or ``P.py``, where Python's path
    finder takes it from (a folder without ``__init__.py`` is only a namespace portion: a later regular
    package wins); packages found nowhere so, and ``vllm`` (the tree's), are left to the usual search."""
    named = (value.partition(":")[0].strip().split(".")[0] for p in plugins for _, _, value in p.entry_points)
    packages = sorted({*(top for plugin in plugins for top in plugin.packages), *named})
    homes = []
    for package in packages:
        if not package.isidentifier() or package == "vllm":  # the audited vLLM is the tree's, wherever
            continue
        for folder in import_order:
            if (folder / package / "__init__.py").is_file() or (folder / f"{package}.py").is_file():
                homes.append((package, folder))
                break
    return tuple(homes)


EDITABLE_FINDER = re.compile(r"__editable___.*_finder\.py")


def editable_installs(site: Path) -> tuple[list[Path], list[tuple[str, Path]]]:
    """Where ``pip install -e`` put a site directory's packages, read as ``site`` and setuptools'
    editable finder use it, neither run: the folders the path lines of its ``.pth`` files add to
    ``sys.path`` (an ``import`` line is code, not read), and the ``MAPPING`` literal of each
    ``__editable___*_finder.py`` (top-level package -> its folder or file)."""
    try:
        names = sorted(os.listdir(site))  # site.addsitedir reads them in this order
    except OSError:
        return [], []
    paths: list[Path] = []
    mapping: list[tuple[str, Path]] = []
    for name in names:
        if name.endswith(".pth") and not name.startswith("."):
            paths += _pth_paths(site, site / name)
        elif EDITABLE_FINDER.fullmatch(name):
            mapping += _finder_mapping(site / name)
    return paths, mapping


def _pth_paths(site: Path, pth: Path) -> list[Path]:
    """The existing folders a ``.pth`` file's path lines name, relative to its site directory."""
    try:
        lines = pth.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return []
    named = (
        site / line.rstrip()
        for line in lines
        if line.strip() and not line.startswith("#") and not line.startswith(("import ", "import\t"))
    )
    return [path.resolve() for path in named if path.is_dir()]


def _finder_mapping(finder: Path) -> list[tuple[str, Path]]:
    """The ``MAPPING = {...}`` literal of setuptools' editable finder module, read with ast (the
    finder is never imported); none if it has no such literal of strings."""
    try:
        module = ast.parse(finder.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return []
    for statement in module.body:
        match statement:
            case (
                ast.Assign(targets=[ast.Name(id="MAPPING")], value=value)
                | ast.AnnAssign(target=ast.Name(id="MAPPING"), value=ast.expr() as value)
            ):
                try:
                    found = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # not a plain literal
                    return []
                if isinstance(found, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
                    return [(package, Path(folder)) for package, folder in found.items() if package.isidentifier()]
    return []


def runs_with(plugin_tree: SourceTree, vllm: str | None, release=None) -> SourceTree:
    """A plugin directory with the vLLM it runs with: ``vllm`` (a path, or a version number that
    ``release`` turns into a cached release tree), else the installed one, else none."""
    if vllm is None:
        try:
            base = _installed_vllm()
        except UsageError:
            return plugin_tree
    elif Path(vllm).expanduser().exists() or release is None:
        base = locate(Path(vllm))
        if not base.is_vllm:
            raise UsageError(f"--vllm {vllm}: not a vLLM tree (no vllm/{REGISTRY})")
    elif "/" in vllm or not re.match(r"\d", vllm):  # a path that is not there, not a release number
        raise UsageError(f"--vllm {vllm}: no such directory, and not a vLLM version number (e.g. 0.34.0)")
    else:
        base = locate(release(vllm))
    return replace(plugin_tree, vllm_version=base.vllm_version, extra_roots=(base.root,), runs_with=base)


def discover(search_paths: list[Path] | None = None) -> list[PluginDist]:
    """Distributions with vLLM plugin entry points, in ``search_paths`` (default: ``sys.path``), in
    the order ``importlib.metadata`` and so vLLM find them: by search path, then in the order a
    directory lists its entries (not sorted); their entry points in the order of ``entry_points.txt``.

    A name found twice is the first one, as ``importlib.metadata`` sees it (``entry_points`` keeps one
    distribution per name, the first found, whether or not it has entry points)."""
    if search_paths is not None and not any(map(_holds_metadata, search_paths)):
        return []  # a source tree on its own (most scans): no need to import importlib.metadata
    import importlib.metadata

    paths = None if search_paths is None else [str(p) for p in search_paths]
    found: dict[str, PluginDist] = {}
    seen: set[str] = set()
    for dist in importlib.metadata.distributions(**({} if paths is None else {"path": paths})):
        name = dist.metadata["Name"]
        if not name or _normal(name) in seen:
            continue
        seen.add(_normal(name))
        if _normal(name) == "vllm":  # vLLM's own entry points are in-tree
            continue
        points = tuple((ep.group, ep.name, ep.value) for ep in dist.entry_points if ep.group in GROUPS)
        if points:
            location = Path(str(dist.locate_file(""))).resolve()
            packages = tuple((dist.read_text("top_level.txt") or "").split())
            found[_normal(name)] = PluginDist(name, dist.version, location, points, packages)
    return list(found.values())


def _holds_metadata(folder: Path) -> bool:
    """Whether ``importlib.metadata`` may find a distribution in ``folder``: it has a ``.dist-info``,
    ``.egg-info`` or ``.egg`` entry, is an egg itself, or is not a directory it can list (a zip on ``sys.path``)."""
    if folder.name.lower().endswith(".egg"):  # an egg on the path: its EGG-INFO is the metadata
        return True
    try:
        with os.scandir(folder) as entries:
            return any(e.name.lower().endswith((".dist-info", ".egg-info", ".egg")) for e in entries)
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
