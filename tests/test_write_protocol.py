"""fix's write protocol: all files or none, only over the bytes analysed, metadata kept,
never through a hard link or out of the tree, and an interrupted run settled by the next command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli
from mtp_audit.apply import write
from mtp_audit.errors import UsageError
from mtp_audit.fix import plan_fix, write_fix
from mtp_audit.locate import locate

MODELS = "vllm/model_executor/models"


def tree_of(case: str, tmp_path: Path) -> Path:
    return build_tree(FIXTURES / "scan" / case, tmp_path / case)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if "mtp-audit" in p.name]


def give_metadata(path: Path) -> None:
    """Mode 0640, an extended attribute and (as root) another owner: what a rewrite must keep."""
    path.chmod(0o640)
    try:
        os.setxattr(path, "user.origin", b"review-42")
    except OSError:
        pytest.skip("no user extended attributes on this file system")
    if os.geteuid() == 0:
        os.chown(path, 1234, 5678)


def test_owner_mode_and_extended_attributes_are_kept(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    path = tree / MODELS / "toy_mtp.py"
    give_metadata(path)
    before = path.stat()
    assert run_cli("fix", str(tree), "--model", "toy").returncode == 0
    after = path.stat()
    assert "def get_top_tokens" in path.read_text()
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid, before.st_gid)
    assert os.getxattr(path, "user.origin") == b"review-42"
    assert no_temp_files(tree)


def test_a_file_with_other_hard_links_is_refused(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    path = tree / MODELS / "toy_mtp.py"
    os.link(path, tmp_path / "another-name.py")
    before = snapshot(tree)
    result = run_cli("fix", str(tree), "--model", "toy")
    assert result.returncode == 2 and "hard link" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(tree) == before


def test_an_edit_during_the_write_phase_refuses_the_run_and_puts_back_what_was_written(tmp_path, monkeypatch):
    tree = tree_of("delegation_cross_file", tmp_path)
    result = plan_fix(locate(tree), None, True, None)
    assert len(result.rewrites) == 2
    first, second = (tree / r.path for r in result.rewrites)
    original = first.read_bytes()
    replace = write._replace

    def replace_then_edit(path, data, expected):  # the user saves the second file right after the first is written
        replace(path, data, expected)
        if path == first.resolve():
            second.write_text(second.read_text() + "# saved by the user\n")

    monkeypatch.setattr(write, "_replace", replace_then_edit)
    with pytest.raises(UsageError, match="changed while fix was writing"):
        write_fix(result)
    assert first.read_bytes() == original
    assert second.read_text().endswith("# saved by the user\n")
    assert no_temp_files(tree)


def test_an_edit_saved_while_the_new_text_goes_to_disk_is_never_overwritten(tmp_path, monkeypatch):
    """The re-check sits after the temporary file is written and synced, right before the rename:
    an editor's save during a slow fsync refuses the run instead of being replaced."""
    tree = tree_of("direct_head", tmp_path)
    result = plan_fix(locate(tree), None, True, None)
    [target] = (tree / r.path for r in result.rewrites)
    fsync = os.fsync

    def slow_disk(fd):  # the user saves the file while the new text is being synced
        if os.readlink(f"/proc/self/fd/{fd}") == str(write._temp_of(target.resolve())):
            target.write_text(target.read_text() + "# saved by the user\n")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_disk)
    with pytest.raises(UsageError, match="changed while fix was writing"):
        write_fix(result)
    assert target.read_text().endswith("# saved by the user\n")
    assert no_temp_files(tree)


_KILLED_WRITE = textwrap.dedent("""
    import os, sys
    from mtp_audit.apply import write
    from mtp_audit.fix import plan_fix, write_fix
    from mtp_audit.locate import locate

    result = plan_fix(locate(__import__("pathlib").Path(sys.argv[1])), None, True, None)
    stop_after = int(sys.argv[2])
    replace, count = write._replace, [0]

    def replace_then_die(path, data, expected):
        if count[0] == stop_after:
            os._exit(9)  # as kill -9: no cleanup of any kind
        count[0] += 1
        replace(path, data, expected)

    write._replace = replace_then_die
    write_fix(result)
""")


@pytest.mark.parametrize("stop_after", [0, 1])
def test_a_killed_write_is_completed_by_the_next_command(tmp_path, stop_after):
    tree = tree_of("delegation_cross_file", tmp_path)
    fixed = tree_of("delegation_cross_file", tmp_path / "reference")
    assert run_cli("fix", str(fixed), "--all").returncode == 0
    died = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITE, str(tree), str(stop_after)],
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert died.returncode == 9
    journal = json.loads((tree / write.JOURNAL).read_text())
    assert all(not Path(e["path"]).is_absolute() for e in journal["files"])  # read against the tree's root
    fixed_again = run_cli("fix", str(tree), "--all")
    assert "completed a fix that was interrupted" in fixed_again.stderr
    assert fixed_again.returncode == 0  # and nothing is left to write
    assert snapshot(tree) == snapshot(fixed)
    assert no_temp_files(tree)


_CTRL_C_DURING_WRITE = textwrap.dedent("""
    import os, signal, sys, time
    from mtp_audit.apply import write

    tree, ctrl_c_after, signum = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    replace, count = write._replace, [0]

    def replace_then_ctrl_c(path, data, expected):
        replace(path, data, expected)
        count[0] += 1
        if count[0] == ctrl_c_after:
            os.kill(os.getpid(), signum)  # the user presses Ctrl-C, or a CI job's timeout sends SIGTERM
            time.sleep(0.2)  # time for the main thread to take it

    write._replace = replace_then_ctrl_c
    sys.argv = ["mtp-audit", "fix", tree, "--all"]
    from mtp_audit.__main__ import main

    main()
""")


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGINT, 130, "mtp-audit: interrupted\n"), (signal.SIGTERM, 143, "mtp-audit: terminated\n")],
)
@pytest.mark.parametrize("ctrl_c_after", [1, 2])
def test_ctrl_c_during_the_write_puts_every_file_back(tmp_path, ctrl_c_after, signum, code, said):
    """As the CLI runs it (the command on its own thread, Ctrl-C taken by the main thread), on every
    supported Python: on CPython <= 3.12 a join interrupted by Ctrl-C took the writing thread for
    ended, and the process exited half written, journal and temporary file left behind. SIGTERM
    killed the process where it stood: the tree stayed half written until the next fix."""
    tree = tree_of("delegation_cross_file", tmp_path)
    before = snapshot(tree)
    done = subprocess.run(
        [sys.executable, "-c", _CTRL_C_DURING_WRITE, str(tree), str(ctrl_c_after), str(int(signum))],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert (done.returncode, done.stderr) == (code, said)
    assert snapshot(tree) == before
    assert no_temp_files(tree)


def test_an_interrupted_write_whose_file_was_edited_since_is_undone(tmp_path, capsys):
    tree = tree_of("delegation_cross_file", tmp_path)
    before = snapshot(tree)
    result = plan_fix(locate(tree), None, True, None)
    first, second = (tree / r.path for r in result.rewrites)
    entries = [{"path": r.path, "old": r.old, "new": r.new} for r in result.rewrites]
    (tree / write.JOURNAL).write_text(json.dumps({"tool": "mtp-audit", "files": entries}))
    first.write_text(result.rewrites[0].new)  # the run had written the first file
    second.write_text(second.read_text() + "# edited after the crash\n")
    write.recover(tree)
    err = capsys.readouterr().err
    assert "undid a fix that was interrupted" in err and second.name in err
    assert first.read_bytes() == before[first.relative_to(tree).as_posix()]
    assert not (tree / write.JOURNAL).exists()


@pytest.mark.parametrize(
    "args",
    [
        ["scan"],
        ["scan", "--format", "json"],
        ["fix", "--all", "--diff"],
        ["fix", "--all", "--check"],
        ["pre-commit"],  # without --fix it only reads, whatever files it is handed
    ],
)
def test_a_command_that_only_reads_refuses_a_tree_with_an_interrupted_fix_and_writes_nothing(tmp_path, args):
    tree = tree_of("delegation_cross_file", tmp_path)
    result = plan_fix(locate(tree), None, True, None)
    entries = [{"path": r.path, "old": r.old, "new": r.new, "encoding": "utf-8"} for r in result.rewrites]
    (tree / write.JOURNAL).write_text(json.dumps({"tool": "mtp-audit", "files": entries}))
    (tree / result.rewrites[0].path).write_text(result.rewrites[0].new)  # half written
    before = snapshot(tree)
    if args == ["pre-commit"]:  # run from the checkout, on the files a commit stages
        refused = run_cli("pre-commit", *(r.path for r in result.rewrites), cwd=tree)
    else:
        refused = run_cli(args[0], str(tree), *args[1:])
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        f"mtp-audit: {tree / write.JOURNAL}: a fix was interrupted in this tree and left this journal; this command "
        "only reads, so it neither completes nor undoes it: run the same `mtp-audit fix` (without --diff, --check "
        "or --patches) in this tree again to settle it, or check the files it names with your version control, "
        "then delete it\n"
    )
    assert snapshot(tree) == before


def test_a_command_that_only_reads_waits_for_a_fix_writing_now(tmp_path):
    """A journal whose fix is alive (it holds the tree's lock) is no interrupted fix: a scan started
    during the write waited for nothing and said "a fix was interrupted ... then delete it" (deleting
    a live writer's journal takes its crash recovery away). It waits for the write and reads the result."""
    tree = tree_of("delegation_cross_file", tmp_path)
    result = plan_fix(locate(tree), None, True, None)
    entries = [{"path": r.path, "old": r.old, "new": r.new, "encoding": "utf-8"} for r in result.rewrites]
    with write.tree_lock(tree):  # the writer, mid-write: journal on disk, first file replaced
        (tree / write.JOURNAL).write_text(json.dumps({"tool": "mtp-audit", "files": entries}))
        (tree / result.rewrites[0].path).write_text(result.rewrites[0].new)
        reader = subprocess.Popen(
            [sys.executable, "-m", "mtp_audit", "scan", str(tree), "--format", "json", "--no-cache"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        )
        _until_blocked_on_the_lock(reader)
        assert reader.poll() is None  # waiting for the write
        for rewrite in result.rewrites[1:]:
            (tree / rewrite.path).write_text(rewrite.new)
        (tree / write.JOURNAL).unlink()  # the write is done
    out, err = reader.communicate(timeout=60)
    assert (reader.returncode, err) == (0, "")
    assert {d["status"] for d in json.loads(out)["drafters"]} == {"supported"}


def _until_blocked_on_the_lock(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """Until ``process`` waits for a flock (Linux lists a waiter in /proc/locks as ``-> FLOCK ... PID``):
    a reader that looked after the write was done would pass the test without waiting."""
    locks = Path("/proc/locks")
    deadline = time.monotonic() + timeout
    while locks.exists() and time.monotonic() < deadline:
        if any(
            "->" in line and "FLOCK" in line and str(process.pid) in line.split()
            for line in locks.read_text().splitlines()
        ):
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    if locks.exists():
        raise AssertionError("the reader never waited for the tree's lock")
    time.sleep(1.0)  # no /proc/locks to ask: give it time to reach the lock


def _planted(tmp_path: Path, tree: Path, case: str) -> tuple[str, str]:
    """A journal entry no fix writes, planted in ``tree``: its path and old text; the file it names
    (outside the tree, or not a model file) holds that old text."""
    outside = tmp_path / "elsewhere" / "outside.py"
    outside.parent.mkdir()
    outside.write_text("precious = 1\n")
    if case == "absolute outside":
        return str(outside), "precious = 1\n"
    if case == "relative outside":
        return "../elsewhere/outside.py", "precious = 1\n"
    if case == "symlink out":
        (tree / "link.py").symlink_to(outside)
        return "link.py", "precious = 1\n"
    if case == "directory symlink out":
        (tree / "linked").symlink_to(outside.parent)
        return "linked/outside.py", "precious = 1\n"
    if case == "empty old text":
        (tree / "empty.py").write_text("")
        return "empty.py", ""
    if case == "not python":
        (tree / "setup.cfg").write_text("[tool]\n")
        return "setup.cfg", "[tool]\n"
    assert case == "hard link"
    (tree / "linked.py").hardlink_to(outside)
    return "linked.py", "precious = 1\n"


@pytest.mark.parametrize(
    "case",
    [
        "absolute outside",
        "relative outside",
        "symlink out",
        "directory symlink out",
        "empty old text",
        "not python",
        "hard link",
    ],
)
def test_a_journal_naming_a_file_no_fix_writes_is_refused_and_nothing_is_written(tmp_path, case):
    tree, entries = journaled_tree(tmp_path, {"a": "new", "b": "old"})
    path, old = _planted(tmp_path, tree, case)
    entries.append({"path": path, "old": old, "new": "overwritten = 1\n", "encoding": "utf-8"})
    (tree / write.JOURNAL).write_text(json.dumps({"tool": "mtp-audit", "files": entries}))
    before = snapshot(tmp_path)
    with pytest.raises(UsageError) as refusal:
        write.recover(tree)
    message = str(refusal.value)
    assert message.startswith(f"{tree / write.JOURNAL}: an interrupted fix left this journal, and its entry {path!r} ")
    assert message.endswith("; nothing written: check the files it names with your version control, then delete it")
    assert snapshot(tmp_path) == before  # the journal kept, no file touched, in the tree or out of it


def test_a_journal_path_is_read_against_the_tree_root_never_the_working_directory(tmp_path, monkeypatch, capsys):
    tree, entries = journaled_tree(tmp_path, {"a": "old"})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(entries[0]["old"])  # the same name in the working directory
    write.recover(tree)
    assert contents(tree, entries) == ["new"]
    assert (tmp_path / "a.py").read_text() == entries[0]["old"]


def test_fix_refuses_a_journal_naming_a_file_out_of_the_tree(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    outside = tmp_path / "outside.py"
    outside.write_text("precious = 1\n")
    entry = {"path": str(outside), "old": "precious = 1\n", "new": "overwritten = 1\n", "encoding": "utf-8"}
    (tree / write.JOURNAL).write_text(json.dumps({"tool": "mtp-audit", "files": [entry]}))
    before = snapshot(tmp_path)
    result = run_cli("fix", str(tree), "--all")
    assert result.returncode == 2 and str(outside) in result.stderr and str(tree / write.JOURNAL) in result.stderr
    assert snapshot(tmp_path) == before


def test_pr_body_path_is_checked_before_anything_is_written(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    before = snapshot(tree)
    result = run_cli("fix", str(tree), "--model", "toy", "--pr-body", str(tmp_path / "missing" / "body.md"))
    assert result.returncode == 2 and "--pr-body" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize("content", ["not json", "[]", '{"results": [{"arch": 1}]}', '{"results": 3}'])
def test_malformed_verify_report_is_refused_before_anything_is_written(tmp_path, content):
    tree = tree_of("direct_head", tmp_path)
    report = tmp_path / "verify.json"
    report.write_text(content)
    before = snapshot(tree)
    result = run_cli(
        "fix", str(tree), "--model", "toy", "--pr-body", str(tmp_path / "body.md"), "--verify-report", str(report)
    )
    assert result.returncode == 2 and "--verify-report" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert snapshot(tree) == before and not (tmp_path / "body.md").exists()


def journaled_tree(tmp_path: Path, states: dict[str, str], encoding: str = "utf-8") -> tuple[Path, list[dict]]:
    """A tree as a killed ``fix`` leaves it: its journal, and each listed file in the given state
    ("old", "new", "edited" or "deleted")."""
    tree = tmp_path / "tree"
    tree.mkdir(parents=True)
    entries = []
    for name, state in states.items():
        path = tree / f"{name}.py"
        old, new = (
            f"# {name} café\nclass A:\n    pass\n",
            f"# {name} café\nclass A:\n    def get_top_tokens(self): ...\n",
        )
        text = {"old": old, "new": new, "edited": old + "# saved after the crash\n"}.get(state)
        if text is not None:
            path.write_bytes(text.encode(encoding))
        entries.append({"path": path.name, "old": old, "new": new, "encoding": encoding})
    (tree / write.JOURNAL).write_text(json.dumps({"tool": "mtp-audit", "files": entries}))
    return tree, entries


def contents(tree: Path, entries: list[dict], encoding: str = "utf-8") -> list[str | None]:
    """What each journaled file holds now: "old", "new", its bytes when neither, None when absent."""
    found = []
    for entry in entries:
        path = tree / entry["path"]
        data = path.read_bytes() if path.exists() else None
        found.append(
            "old" if data == entry["old"].encode(encoding) else "new" if data == entry["new"].encode(encoding) else data
        )
    return found


@pytest.mark.parametrize("states", [["old", "old", "old"], ["new", "old", "old"], ["new", "new", "old"], ["new"] * 3])
def test_recover_completes_a_write_killed_while_every_file_holds_old_or_new_text(tmp_path, capsys, states):
    tree, entries = journaled_tree(tmp_path, dict(zip("abc", states)))
    write._temp_of(tree / entries[1]["path"]).write_bytes(b"half a file")  # the replace it was doing
    write.recover(tree)
    assert contents(tree, entries) == ["new", "new", "new"]
    assert capsys.readouterr().err == f"mtp-audit: completed a fix that was interrupted in {tree} (3 file(s))\n"
    assert sorted(p.name for p in tree.iterdir()) == ["a.py", "b.py", "c.py"]  # no journal, no temporary file


@pytest.mark.parametrize("changed", ["edited", "deleted"])
def test_recover_undoes_the_write_when_a_file_changed_since_and_leaves_that_file_alone(tmp_path, capsys, changed):
    tree, entries = journaled_tree(tmp_path, {"a": "new", "b": changed, "c": "old", "d": "new"})
    edited = (tree / "b.py").read_bytes() if changed == "edited" else None
    write.recover(tree)
    assert contents(tree, entries) == ["old", edited, "old", "old"]
    assert capsys.readouterr().err == (
        f"mtp-audit: undid a fix that was interrupted in {tree} (put back: a.py, d.py); {tree / 'b.py'} changed since, "
        "left as they are\n"
    )
    assert not (tree / write.JOURNAL).exists()


def test_recover_with_nothing_to_put_back_names_every_file_changed_since(tmp_path, capsys):
    tree, entries = journaled_tree(tmp_path, {"a": "old", "b": "edited", "c": "deleted"})
    edited = (tree / "b.py").read_bytes()
    write.recover(tree)
    assert contents(tree, entries) == ["old", edited, None]
    assert capsys.readouterr().err == (
        f"mtp-audit: undid a fix that was interrupted in {tree}; {tree / 'b.py'}, {tree / 'c.py'} changed since, "
        "left as they are\n"
    )


def test_a_journal_this_user_cannot_finish_stops_the_command_and_is_kept(tmp_path, monkeypatch):
    tree, entries = journaled_tree(tmp_path, {"a": "new", "b": "old"})

    def read_only(root):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(write, "tree_lock", read_only)
    with pytest.raises(UsageError) as refusal:
        write.recover(tree)
    assert str(refusal.value) == (
        f"{tree / write.JOURNAL}: an interrupted fix left this journal, and this user cannot finish it "
        "(no write access to the tree)"
    )
    assert (tree / write.JOURNAL).exists() and contents(tree, entries) == ["new", "old"]


def test_recover_writes_each_file_back_in_its_own_encoding(tmp_path, capsys):
    tree, entries = journaled_tree(tmp_path, {"a": "new", "b": "old"}, encoding="latin-1")
    write.recover(tree)
    assert contents(tree, entries, "latin-1") == ["new", "new"]
    tree, entries = journaled_tree(tmp_path / "undo", {"a": "new", "b": "edited"}, encoding="latin-1")
    write.recover(tree)
    assert contents(tree, entries, "latin-1")[0] == "old"
    assert "put back: a.py" in capsys.readouterr().err


def test_a_journal_never_committed_is_dropped_and_no_file_is_touched(tmp_path, capsys):
    tree, entries = journaled_tree(tmp_path, {"a": "new", "b": "old"})
    (tree / write.JOURNAL).rename(write._temp_of(tree / write.JOURNAL))  # killed while writing the journal
    write.recover(tree)
    assert contents(tree, entries) == ["new", "old"]
    assert sorted(p.name for p in tree.iterdir()) == ["a.py", "b.py"]
    assert capsys.readouterr().err == ""


def test_a_journal_that_cannot_be_read_stops_the_command_and_is_kept(tmp_path):
    tree, entries = journaled_tree(tmp_path, {"a": "new"})
    (tree / write.JOURNAL).write_text('{"tool": "mtp-audit"}')
    with pytest.raises(UsageError) as refusal:
        write.recover(tree)
    assert str(refusal.value) == (
        f"{tree / write.JOURNAL}: an interrupted fix left this journal and it cannot be read ('files'); "
        "check the files it names with your version control, then delete it"
    )
    assert (tree / write.JOURNAL).exists() and contents(tree, entries) == ["new"]


def test_a_replaced_file_keeps_its_owner_mode_and_extended_attributes(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("old text, longer than the new one\n")
    give_metadata(path)
    before = path.stat()
    write._temp_of(path).write_bytes(b"a stale temporary file, longer than the new text")
    write._replace(path, b"new\n", expected=b"old text, longer than the new one\n")
    after = path.stat()
    assert path.read_bytes() == b"new\n"
    assert (after.st_mode, after.st_uid, after.st_gid) == (before.st_mode, before.st_uid, before.st_gid)
    assert os.listxattr(path) == ["user.origin"] and os.getxattr(path, "user.origin") == b"review-42"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]


def test_a_file_system_without_extended_attributes_is_no_obstacle(tmp_path, monkeypatch):
    path = tmp_path / "model.py"
    path.write_text("old\n")

    def unsupported(*args):
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(os, "listxattr", unsupported)
    write._replace(path, b"new\n", expected=b"old\n")
    assert path.read_bytes() == b"new\n"


def test_an_owner_this_user_cannot_give_back_refuses_the_write(tmp_path, monkeypatch):
    path = tmp_path / "model.py"
    path.write_text("old\n")
    owner = os.stat(path)
    monkeypatch.setattr(os, "geteuid", lambda: owner.st_uid + 1)  # the file belongs to someone else

    def refuse(fd, uid, gid):
        assert (uid, gid) == (owner.st_uid, owner.st_gid)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", refuse)
    with pytest.raises(UsageError) as refusal:
        write._replace(path, b"new\n", expected=b"old\n")
    assert str(refusal.value) == (
        f"{path} belongs to uid {owner.st_uid}, gid {owner.st_gid}, which this user cannot give the rewritten "
        "file; nothing written"
    )
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]


def test_a_temporary_file_planted_as_a_symlink_is_never_written_through(tmp_path):
    path, outside = tmp_path / "model.py", tmp_path / "outside.txt"
    path.write_text("old\n")
    outside.write_text("not ours\n")
    write._temp_of(path).symlink_to(outside)
    with pytest.raises(OSError):
        write._replace(path, b"new\n", expected=b"old\n")
    assert (path.read_bytes(), outside.read_bytes()) == (b"old\n", b"not ours\n")


def test_a_journal_of_an_older_run_without_encodings_is_read_as_utf8(tmp_path, capsys):
    tree, entries = journaled_tree(tmp_path, {"a": "new", "b": "old"})
    for entry in entries:
        del entry["encoding"]
        entry["path"] = str(tree / entry["path"])  # absolute, as older runs wrote them
    (tree / write.JOURNAL).write_text(json.dumps({"tool": "mtp-audit", "files": entries}))
    write.recover(tree)
    assert contents(tree, entries) == ["new", "new"]
