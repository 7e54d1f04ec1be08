"""Without the lake extra (pyiceberg, pyarrow, DuckDB's iceberg/avro/httpfs packages) the
lake's commands say which extra to install, in one line with a non-zero exit, and every
other command works, a config file's `[lake]` table included. The extra is hidden from a
child interpreter by a finder that refuses its modules, as a core install lacks them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import harness

LAKE_MODULES = ("pyiceberg", "pyarrow", "pyiceberg_core", "duckdb_extension_iceberg", "duckdb_extension_avro",
                "duckdb_extension_httpfs")  # fmt: skip
WITHOUT_LAKE = f"""
import sys

class NoLake:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {LAKE_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NoLake())
from llmtap.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _without_lake(tmp_path: Path, *args: str, config: str | None = None) -> subprocess.CompletedProcess[str]:
    env = harness.clean_env(LLMTAP_HOME=str(tmp_path / "home"))
    if config is not None:
        (tmp_path / "llmtap.toml").write_text(config)
        env["LLMTAP_CONFIG"] = str(tmp_path / "llmtap.toml")
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_LAKE, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    done = _without_lake(tmp_path, "db", "upgrade", "--db", url)
    assert done.returncode == 0, done.stderr
    return url


@pytest.mark.parametrize(
    "command",
    [("lake", "sync", "--warehouse", "{tmp}/lake"), ("prune", "--older-than", "1d", "--synced", "--warehouse",
     "{tmp}/lake"), ("report", "usage", "--lake", "{tmp}/lake")],
    ids=["lake sync", "prune --synced", "report --lake"],
)  # fmt: skip
def test_the_lake_without_its_extra_is_one_line_naming_it(tmp_path: Path, db: str, command: tuple[str, ...]) -> None:
    done = _without_lake(tmp_path, *(part.format(tmp=tmp_path) for part in command), "--db", db)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmtap: error: "), done.stderr
    assert "pip install 'llmtap[lake]'" in lines[0] and "uv sync --extra lake" in lines[0]


def test_everything_else_works_without_it_with_a_lake_table_in_the_config(tmp_path: Path, db: str) -> None:
    config = '[lake]\nwarehouse = "s3://bucket/llmtap"\n"s3.endpoint" = "http://127.0.0.1:9"\n'
    done = _without_lake(tmp_path, "report", "usage", "--db", db, config=config)
    assert done.returncode == 0, done.stderr
    done = _without_lake(tmp_path, "config", "check", str(tmp_path / "llmtap.toml"), config=config)
    assert done.returncode == 0, done.stderr
