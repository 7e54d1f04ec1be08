"""Run the installed `llmtap` as a user of the wheel would, from a folder outside the
checkout: every command's and subcommand's --help, an import of a corpus HAR, the usage
report on it, `lake sync` naming the lake extra (the wheel is installed without it), and
the demo. Exits non-zero at the first command that fails.

usage: VENV/bin/python .ci/wheel_check.py HAR_FILE WORK_DIR
(the interpreter is the fresh venv's, so `llmtap` is the wheel's, never the checkout's)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path the parser knows (`report`, `db upgrade`, …), walked from its
    subparsers, so a new command is checked without this list being told."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from command_paths(sub, (*prefix, name))


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    print("+ llmtap", " ".join(args[1:]), flush=True)
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or "Traceback" in done.stderr:
        sys.exit(f"failed ({done.returncode}): {' '.join(args)}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def main() -> None:
    har, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    work.mkdir(parents=True, exist_ok=True)
    import llmtap.cli.main as cli_main  # the wheel's copy: this interpreter is the fresh venv's

    checkout = Path(__file__).resolve().parents[1]
    where = Path(cli_main.__file__).resolve()
    if checkout in where.parents:
        sys.exit(f"llmtap was imported from the checkout ({where}), not from the installed wheel")
    script = Path(sys.executable).parent / "llmtap"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTAP_")}
    env["LLMTAP_HOME"] = str(work / "home")

    run([str(script), "--help"], work, env)
    paths = list(command_paths(cli_main.build_parser()))
    for path in paths:
        run([str(script), *path, "--help"], work, env)
    db = f"sqlite:///{work / 'store.db'}"
    run([str(script), "import", str(har), "--db", db], work, env)
    print(run([str(script), "report", "usage", "--by", "team", "--db", db], work, env))
    lake = [str(script), "lake", "sync", "--warehouse", str(work / "lake"), "--db", db]
    print("+ llmtap", " ".join(lake[1:]), flush=True)
    done = subprocess.run(lake, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 2 or "llmtap[lake]" not in done.stderr or len(done.stderr.splitlines()) != 1:
        sys.exit(f"lake sync without the lake extra did not name it in one line ({done.returncode}): {done.stderr}")
    demo = work / "demo"
    demo.mkdir(exist_ok=True)
    run([str(script), "demo"], demo, env | {"LLMTAP_HOME": str(demo / "home")}, timeout=600)
    print(f"wheel check: {len(paths) + 1} help pages, import, report usage and demo passed in {work}")


if __name__ == "__main__":
    main()
