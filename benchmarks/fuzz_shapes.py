"""Run the property-based mirror-rule checks over many generated cases (default 10,000).

    python benchmarks/fuzz_shapes.py [--examples 10000]

Same properties as tests/test_properties.py (which CI runs with a small
budget): classification consistent with the mirror rule, never a mirror of a
body that touches the logits after the head call, fix output that parses, is
the old file plus exactly the method, and is idempotent.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=10_000)
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "MTP_AUDIT_FUZZ_EXAMPLES": str(args.examples)}
    start = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--hypothesis-show-statistics",
            str(root / "tests/test_properties.py"),
        ],
        env=env,
        cwd=root,
        check=False,
    )
    print(f"{args.examples} examples per property in {time.perf_counter() - start:.0f} s")
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
