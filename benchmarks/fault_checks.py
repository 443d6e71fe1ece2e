"""Faults at random moments: kill -9, Ctrl-C, SIGTERM and a user's edit during ``fix`` and ``scan``.

Each trial runs the real command on a copy of a vLLM release and strikes at a
random moment of its run (the run's length is measured first):

- kill -9 of ``fix --all``: once its journal is settled (``recover``, what the
  next ``fix`` that writes does first; a ``scan`` refuses such a tree),
  the tree is byte for byte the old one or the fully fixed one, with no
  temporary file or journal left; no process of ours outlives it by 2 s;
- Ctrl-C (SIGINT to the process group) of ``fix --all --diff``, of a cold
  ``scan`` and of a writing ``fix --all`` (aimed at its end, where it writes):
  exit 130 within a second, one line on stderr, no traceback, no survivor; the
  written tree is the old one (put back) or the fixed one, never a mix, with no
  journal or temporary file;
- SIGTERM to the process alone (``kill PID``, a CI job's timeout) of a writing
  ``fix --all``: the same, with exit 143;
- an edit saved to a target file while ``fix --all`` runs: never lost.

    python benchmarks/fault_checks.py [--trials 20] [--vllm-version 0.34.0] [--seed N]

Exits 1 if any trial fails (CI runs it with a few trials).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mtp_audit.sources import release_tree

ORPHAN_GRACE_S = 2.0
SIGINT_GRACE_S = 1.0


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mtp_audit", *args]


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def leftovers(root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in root.rglob("*") if "mtp-audit" in p.name]


def alive(group: int) -> list[str]:
    """Running (not zombie: some init processes never reap) processes of the group."""
    out = subprocess.run(["ps", "-o", "pid=,stat=", "-g", str(group)], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split() and not line.split()[1].startswith("Z")]


def wait_gone(group: int, grace: float) -> list[str]:
    deadline = time.monotonic() + grace
    while (left := alive(group)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def start(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        command(*args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
    )


def timed(args: list[str], env: dict) -> float:
    began = time.monotonic()
    subprocess.run(command(*args), capture_output=True, env=env, check=False)
    return time.monotonic() - began


class Checks:
    def __init__(self, release: Path, work: Path, rng: random.Random):
        self.release, self.work, self.rng = release, work, rng
        self.failures: list[str] = []
        self.count = 0
        self.kills = {"old": 0, "fixed": 0, "mixed": 0}  # the tree after each kill -9 and the next command
        self.ctrl_c_writes = {"old": 0, "fixed": 0, "mixed": 0}  # the tree after each Ctrl-C or SIGTERM of a fix
        self.whole_runs: dict[tuple[str, ...], tuple[int | None, list[str], float]] = {}
        self.old = snapshot(release)
        fixed = self.copy("reference")
        subprocess.run(command("fix", str(fixed), "--all", "--quiet"), env=self.env("reference"), check=False)
        self.fixed = snapshot(fixed)
        self.fix_s = timed(["fix", str(self.copy("timing")), "--all", "--quiet"], self.env("timing"))

    def env(self, name: str) -> dict:
        return {**os.environ, "NO_COLOR": "1", "MTP_AUDIT_CACHE_DIR": str(self.work / f"cache-{name}")}

    def copy(self, name: str) -> Path:
        target = self.work / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.release, target)
        return target

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print(f"FAIL {what}", flush=True)

    def kill_during_fix(self, trial: int) -> None:
        tree, env = self.copy(f"kill{trial}"), self.env(f"kill{trial}")
        delay = self.rng.uniform(0, self.fix_s * 1.1)
        process = start(["fix", str(tree), "--all", "--quiet"], env)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        left = wait_gone(process.pid, ORPHAN_GRACE_S)
        if left:
            self.fail(f"kill -9 at {delay:.2f}s: {len(left)} process(es) outlived fix by {ORPHAN_GRACE_S}s")
        settle = f"from mtp_audit.apply.write import recover; recover(__import__('pathlib').Path({str(tree)!r}))"
        subprocess.run([sys.executable, "-c", settle], env=env, capture_output=True, check=False)
        state = snapshot(tree)
        self.kills[("old" if state == self.old else "fixed" if state == self.fixed else "mixed")] += 1
        if state not in (self.old, self.fixed):
            self.fail(
                f"kill -9 at {delay:.2f}s: the tree is neither the old nor the fixed one "
                f"({sum(state.get(k) != v for k, v in self.fixed.items())} files differ from fixed)"
            )
        if leftovers(tree):
            self.fail(f"kill -9 at {delay:.2f}s: left {leftovers(tree)}")
        self.count += 1

    def whole_run(self, args: list[str]) -> tuple[int | None, list[str], float]:
        """Exit code, stderr lines and length of the command run to its end, for telling an end from an interrupt."""
        if tuple(args) not in self.whole_runs:
            began = time.monotonic()
            done = subprocess.run(command(*args), capture_output=True, env=self.env("whole"), check=False)
            took = time.monotonic() - began
            self.whole_runs[tuple(args)] = (
                done.returncode,
                done.stderr.decode(errors="replace").strip().splitlines(),
                took,
            )
        return self.whole_runs[tuple(args)]

    def interrupt(
        self,
        trial: int,
        args: list[str],
        whole: list[str] | None = None,
        delay: float | None = None,
        signum: signal.Signals = signal.SIGINT,
    ) -> bool:
        """Ctrl-C of ``args`` at ``delay`` (random by default), or SIGTERM to the process alone;
        ``whole``: the same command on another copy, for a command that writes. Whether the run
        ended on its own first."""
        whole_exit, whole_lines, length = self.whole_run(whole or args)
        env = self.env(f"int{trial}")
        delay = self.rng.uniform(0.1, length) if delay is None else delay
        process = start(args, env)
        time.sleep(delay)
        ended_first = process.poll() is not None
        if not ended_first and signum == signal.SIGINT:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's whole process group
        elif not ended_first:
            process.send_signal(signum)
        struck = time.monotonic()
        try:
            _, err = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
            self.fail(f"{signum.name} at {delay:.2f}s of {' '.join(args[:2])}: hung")
            return False
        took = time.monotonic() - struck
        lines = err.decode(errors="replace").strip().splitlines()
        # The run ended before the signal (or the signal met a process already exiting): it must have ended
        # as a whole run does, same exit code and same stderr.
        finished = (process.returncode, lines) == (whole_exit, whole_lines)
        if ended_first and not finished:
            self.fail(f"{' '.join(args[:2])} ended on its own with exit {process.returncode}, not {whole_exit}")
        elif not finished and (process.returncode != 128 + signum or len(lines) != 1 or took > SIGINT_GRACE_S):
            self.fail(
                f"{signum.name} at {delay:.2f}s of {' '.join(args[:2])}: exit {process.returncode} after "
                f"{took:.2f}s, stderr {lines[:3]}{' ...' if len(lines) > 3 else ''}"
            )
        left = wait_gone(process.pid, ORPHAN_GRACE_S)
        if left:
            self.fail(f"{signum.name} at {delay:.2f}s of {' '.join(args[:2])}: {len(left)} process(es) left")
        self.count += 1
        return finished

    def interrupt_write(self, trial: int, signum: signal.Signals = signal.SIGINT) -> None:
        """Ctrl-C (or SIGTERM) of a writing ``fix --all``, aimed at the end of its run, where it writes: the tree is
        then the old one (every file put back) or, when the run ended first or the Ctrl-C came once
        every file was in place, the fixed one; never a mix, and no journal or temporary file."""
        tree = self.copy(f"intw{trial}{signum.name}")
        whole = ["fix", str(self.work / "intw-whole"), "--all", "--quiet"]
        if tuple(whole) not in self.whole_runs:
            self.copy("intw-whole")
        delay = self.rng.uniform(0.5, 1.05) * self.fix_s
        finished = self.interrupt(trial, ["fix", str(tree), "--all", "--quiet"], whole, delay, signum)
        state = snapshot(tree)
        self.ctrl_c_writes["fixed" if state == self.fixed else "old" if state == self.old else "mixed"] += 1
        if finished and state != self.fixed:
            self.fail(f"fix --all ended on its own at {delay:.2f}s but the tree is not the fixed one")
        elif state not in (self.old, self.fixed):
            self.fail(
                f"{signum.name} at {delay:.2f}s of fix --all: the tree is neither the old nor the fixed one "
                f"({sum(state.get(k) != v for k, v in self.old.items())} files differ from old)"
            )
        if leftovers(tree):
            self.fail(f"{signum.name} at {delay:.2f}s of fix --all: left {leftovers(tree)}")

    def edit_during_fix(self, trial: int) -> None:
        tree, env = self.copy(f"edit{trial}"), self.env(f"edit{trial}")
        changed = sorted(k for k in self.fixed if self.fixed[k] != self.old[k])
        target = tree / self.rng.choice(changed)
        delay = self.rng.uniform(0, self.fix_s * 1.1)
        marker = f"# saved by the user during trial {trial}\n"
        process = start(["fix", str(tree), "--all", "--quiet"], env)
        time.sleep(delay)
        with target.open("a") as handle:  # as an editor that appends and saves
            handle.write(marker)
        process.communicate()
        if not target.read_text().endswith(marker):
            self.fail(f"edit at {delay:.2f}s of fix: lost ({target.relative_to(tree)}, exit {process.returncode})")
        if leftovers(tree):
            self.fail(f"edit at {delay:.2f}s of fix: left {leftovers(tree)}")
        self.count += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials of each kind")
    parser.add_argument("--vllm-version", default="0.34.0")
    parser.add_argument("--seed", type=int, default=None)
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else random.randrange(1 << 30)
    print(f"fault checks: {options.trials} trial(s) of each kind, seed {seed}", flush=True)
    with tempfile.TemporaryDirectory(prefix="mtp-audit-faults-") as work:
        checks = Checks(release_tree(options.vllm_version), Path(work), random.Random(seed))
        fix_diff = ["fix", str(checks.release), "--all", "--diff", "--jobs", "2"]
        cold_scan = ["scan", str(checks.release), "--no-cache", "--jobs", "2"]
        print(
            f"fix --all {checks.fix_s:.2f}s, fix --all --diff {checks.whole_run(fix_diff)[2]:.2f}s, "
            f"cold scan {checks.whole_run(cold_scan)[2]:.2f}s",
            flush=True,
        )
        for trial in range(options.trials):
            checks.kill_during_fix(trial)
            checks.interrupt(trial, fix_diff)
            checks.interrupt(trial, cold_scan)
            checks.interrupt_write(trial)
            checks.interrupt_write(trial, signal.SIGTERM)
            checks.edit_during_fix(trial)
        print(
            f"{checks.count} trials, {len(checks.failures)} failure(s); after kill -9: {checks.kills}; "
            f"after Ctrl-C or SIGTERM of a writing fix: {checks.ctrl_c_writes}"
        )
    sys.exit(1 if checks.failures else 0)


if __name__ == "__main__":
    main()
