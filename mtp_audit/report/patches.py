"""``fix --patches DIR``: the fix as a numbered series of ``git format-patch`` files, one per family.

Nothing is written into the tree. Each patch holds one family's rewrites,
the pull-request description as its message, and a generated pytest under
``tests/v1/spec_decode/``; ``git am`` applies the series in order onto a git
checkout of the scanned tree (``--keep-non-patch`` keeps the ``[Spec Decode]``
tag in the subject, as ``git am`` drops every leading ``[...]`` otherwise).
``DIR/README.md`` indexes the series, the blast radius and the refusals.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from string import Template

from .. import __version__
from ..apply.families import Family, split_families, written_modules
from ..apply.plan import Action, Plan
from ..apply.result import FixResult
from ..apply.write import diff_lines, encoded_diff
from ..classify.memo import logits_shape
from ..classify.shape_types import ASSUMED_SIGNATURE
from ..errors import UsageError
from ..templating import counted, template
from ..verify.emit import render_family_test
from .pr_body import VerifyReport, left_for_a_human, render_pr_body

TEST_DIR = "tests/v1/spec_decode"
AUTHOR = "mtp-audit <mtp-audit@users.noreply.github.com>"
DATE = "Thu, 1 Jan 1970 00:00:00 +0000"  # the series depends on the tree alone, not on when it was made


@dataclass
class FileChange:
    path: str
    old: str | None  # None: a new file
    new: str
    mode: str  # git's file mode, "100644" or "100755"
    encoding: str = "utf-8"  # the file's own (PEP 263 codec, or utf-8-sig for a BOM): the patch holds its bytes

    @property
    def added(self) -> int:
        return sum(1 for line in self.diff_lines if line.startswith("+") and not line.startswith("+++"))

    @property
    def removed(self) -> int:
        return sum(1 for line in self.diff_lines if line.startswith("-") and not line.startswith("---"))

    @functools.cached_property
    def diff_lines(self) -> list[str]:
        """Unified diff lines, each ending in a newline, as git writes them."""
        fromfile = "/dev/null" if self.old is None else f"a/{self.path}"
        return diff_lines(self.old or "", self.new, fromfile, f"b/{self.path}")

    def git_diff(self) -> bytes:
        """The file's part of the patch: git's header in UTF-8, the diff in the file's own bytes."""
        fromfile = "/dev/null" if self.old is None else f"a/{self.path}"
        diff = encoded_diff(self.old or "", self.new, self.path, fromfile, self.encoding)
        header = [f"diff --git a/{self.path} b/{self.path}\n"]
        new = _blob(self.new.encode(self.encoding))
        if self.old is None:
            header += [f"new file mode {self.mode}\n", f"index 0000000..{new[:7]}\n"]
        else:
            header += [f"index {_blob(self.old.encode(self.encoding))[:7]}..{new[:7]} {self.mode}\n"]
        return "".join(header).encode("utf-8") + diff


def _blob(data: bytes) -> str:
    """The git object id of a file with these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _mode(path: Path) -> str:
    return "100755" if path.stat().st_mode & stat.S_IXUSR else "100644"


def subject(family: Family) -> str:
    return f"[Spec Decode] {family.name}: implement get_top_tokens()"


def _file_name(number: int, text: str) -> str:
    """``git format-patch``'s name: the subject with runs of other characters as one dash and runs of
    dots as one, no dash or dot at either end but a leading dot, then cut (after the trimming, as git
    does: a cut name may end in a dash or a dot)."""
    slug = re.sub(r"\.\.+", ".", re.sub(r"[^A-Za-z0-9_.]+", "-", text)).lstrip("-").rstrip("-.")[:52]
    return f"{number:04d}-{slug}.patch"


def _stepped(family: Family) -> list[tuple[str, str, bool]]:
    """(module, class, compute_logits takes spec_step_idx) of each drafter the family fixes."""
    drafters = []
    for outcome in family.outcomes:
        own = outcome.insertions[0].source  # the drafter's own compute_logits comes first
        # its parameters, which no head signature changes
        params = logits_shape(own.method.text, own.method.line, ASSUMED_SIGNATURE).params
        drafters.append((outcome.record.module, outcome.record.cls, any(p.name == "spec_step_idx" for p in params)))
    return drafters


def _family_result(result: FixResult, family: Family) -> FixResult:
    """The part of the fix one family makes, as a FixResult the PR body renders."""
    written = {module for r in family.rewrites for module in written_modules(r)}
    inheritors = [i for i in result.inheritors if i.base.module in written]
    insertions = [i for o in family.outcomes for i in o.insertions if i in result.plan.insertions]
    notes = [n for n in result.placement_notes if any(k.module in written for k in n.into)]
    return FixResult(
        result.tree,
        Plan(family.outcomes, insertions),
        family.rewrites,
        result.refusal,
        inheritors=inheritors,
        placement_notes=notes,
    )


@dataclass
class Patch:
    number: int
    family: Family
    subject: str
    file_name: str
    changes: list[FileChange]
    test_path: str

    def render(self, total: int, body: str) -> bytes:
        """The patch as ``git format-patch`` writes it: UTF-8 but for each file's diff, in its own bytes."""
        stat_lines = [
            f" {c.path} | {c.added + c.removed} {'+' * min(c.added, 60)}{'-' * min(c.removed, 60)}\n"
            for c in self.changes
        ]
        added = sum(c.added for c in self.changes)
        removed = sum(c.removed for c in self.changes)
        summary = f" {counted(len(self.changes), 'file')} changed"
        summary += f", {counted(added, 'insertion')}(+)" if added else ""
        summary += f", {counted(removed, 'deletion')}(-)" if removed else ""
        number = f"{self.number}/{total}" if total > 1 else ""
        head = "".join(
            [
                f"From {'0' * 40} Mon Sep 17 00:00:00 2001\n",
                f"From: {AUTHOR}\n",
                f"Date: {DATE}\n",
                f"Subject: [PATCH{' ' + number if number else ''}] {self.subject}\n",
                "\n",
                body.rstrip("\n") + "\n",
                "---\n",
                *stat_lines,
                summary + "\n",
                "\n",
            ]
        )
        tail = f"-- \nmtp-audit {__version__}\n\n"
        return head.encode("utf-8") + b"".join(c.git_diff() for c in self.changes) + tail.encode("utf-8")


def build_patches(result: FixResult) -> list[Patch]:
    root = result.tree.root
    patches = []
    seen_tests: set[str] = set()
    for number, family in enumerate(split_families(result.plan, result.rewrites), 1):
        test_path = _free_test_path(family, seen_tests, root)
        seen_tests.add(test_path)
        changes = [FileChange(r.path, r.old, r.new, _mode(root / r.path), r.encoding) for r in family.rewrites]
        changes.append(FileChange(test_path, None, render_family_test(family.name, _stepped(family)), "100644"))
        patches.append(Patch(number, family, subject(family), _file_name(number, subject(family)), changes, test_path))
    return patches


def _free_test_path(family: Family, taken: set[str], root: Path) -> str:
    """The family's test module: named by its slug, else (taken by an earlier family of the series,
    or a file the tree has already) by its whole module path, else numbered; never one that is taken."""
    numbered = (f"{family.qualified_slug}_{n}" for n in itertools.count(2))
    names = itertools.chain([family.slug, family.qualified_slug], numbered)
    paths = (f"{TEST_DIR}/test_{name}_get_top_tokens.py" for name in names)
    return next(p for p in paths if p not in taken and not (root / p).exists())


def check_patch_folder(folder: Path) -> None:
    """Refuse, before anything is written, a ``--patches`` folder that is not new or empty: the series and
    its ``README.md`` would replace what is there (a checkout's own README, an earlier series)."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--patches {folder}: not a folder; give a new or empty folder; nothing written")
    try:
        held = sorted(entry.name for entry in folder.iterdir()) if folder.is_dir() else []
    except OSError as error:
        raise UsageError(f"--patches {folder}: cannot be listed ({error.strerror or error}); nothing written") from None
    if held:
        series = [name for name in held if re.fullmatch(r"[0-9]{4}-.*\.patch", name)]
        listed = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        entries = f"{counted(len(held), 'entry', 'entries')} ({listed})"
        what = f"a patch series ({series[0]}, ...)" if series else entries
        raise UsageError(f"--patches {folder}: already holds {what}; give a new or empty folder; nothing written")


def write_patches(result: FixResult, folder: Path, command: str, verify_report: VerifyReport | None) -> list[Path]:
    """Write the series and its index into ``folder`` (created if needed; one that is not empty is refused).

    ``command``: the fix command without its drafter selection; each patch names its own drafters.
    """
    patches = build_patches(result)
    check_patch_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for patch in patches:
        sub = _family_result(result, patch.family)
        names = sorted({o.record.arch or o.record.cls for o in patch.family.outcomes})
        body = render_pr_body(
            sub,
            f"{command} {' '.join(f'--model {n}' for n in names)}",
            verify_report,
            tests=[patch.test_path],
        )
        path = folder / patch.file_name
        path.write_bytes(patch.render(len(patches), body))
        written.append(path)
    (folder / "README.md").write_text(render_index(result, patches), encoding="utf-8")
    return written


def render_index(result: FixResult, patches: list[Patch]) -> str:
    rows = []
    for patch in patches:
        drafters = "<br>".join(
            sorted({f"`{o.record.arch or '(unregistered)'}` ({o.record.cls})" for o in patch.family.outcomes})
        )
        files = "<br>".join(f"`{c.path}` +{c.added}" + (f" -{c.removed}" if c.removed else "") for c in patch.changes)
        rows.append(
            f"| {patch.number} | [{patch.file_name}]({patch.file_name}) | {drafters} | "
            f"{', '.join(patch.family.platforms)} | {files} |"
        )
    outsiders = [i for i in result.inheritors if not i.drafter]
    reach = (
        "\n".join(
            f"- `{i.cls.name}` ({i.file}:{i.cls.line}) inherits the method written into "
            f"`{i.base.name}` on {', '.join(i.platforms)}: {i.result}"
            for i in outsiders
        )
        or "- none: every class that inherits a written method is a drafter or a drafter's delegate"
    )
    placement = "\n".join(f"- {note}" for note in result.placement_notes) or "- none moved"
    refused = (
        "\n".join(
            f"- `{o.record.arch or '(unregistered)'}` ({o.record.cls}, {o.record.file}, "
            f"{', '.join(o.record.platforms)}): {o.reason}"
            for o in result.plan.outcomes
            if o.action == Action.REFUSED
        )
        or "- none"
    )
    crlf = any("\r\n" in (c.old or "") for p in patches for c in p.changes)
    flags = "--keep-non-patch --keep-cr" if crlf else "--keep-non-patch"
    apply = (
        "Apply in order on a git checkout of the scanned tree:\n\n```bash\n"
        f'git am {flags} *.patch   # --keep-non-patch keeps "[Spec Decode]" in the subjects\n```'
        if patches
        else "None here: `mtp-audit fix` writes no method in this tree (what it refuses or leaves is below)."
    )
    left = left_for_a_human(result.left) or "- none"
    return Template(template("patch_index.md.tmpl")).substitute(
        apply=apply,
        left=left,
        count=counted(len(patches), "patch", "patches"),
        rows="\n".join(rows) or "| - | - | - | - | - |",
        inheritors=reach,
        placement=placement,
        refused=refused,
        version=result.tree.vllm_version or "(unknown version)",
    )
