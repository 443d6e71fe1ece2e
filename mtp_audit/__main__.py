"""``mtp-audit`` and ``python -m mtp_audit``: Ctrl-C is handled from the very first import."""

from __future__ import annotations


def main() -> None:
    from .lifecycle import handle_ctrl_c

    handle_ctrl_c()
    from .cli import main as run

    run()


if __name__ == "__main__":
    main()
