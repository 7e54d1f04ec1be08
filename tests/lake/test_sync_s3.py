"""`llmtap lake sync` to `s3://bucket/prefix` through pyiceberg's pyarrow FileIO, against
moto's S3 server on 127.0.0.1 (never the network): the settings come from `[lake]` in the
config file, the lake's totals equal the store's, and the credentials are never printed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from llmtap.storage.engine import make_engine
from llmtap.storage.migrate import upgrade
from tests.helpers import free_port
from tests.lake.test_sync import ROOT, lake_totals, store_totals, write

SECRET = "moto-secret-never-printed"


@pytest.fixture
def s3() -> Iterator[dict[str, object]]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    properties: dict[str, object] = {
        "s3.endpoint": f"http://127.0.0.1:{port}",
        "s3.region": "us-east-1",
        "s3.access-key-id": "testing",
        "s3.secret-access-key": SECRET,
    }
    try:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key=SECRET,
        )
        client.create_bucket(Bucket="lake")
        yield properties
    finally:
        server.stop()


@pytest.mark.slow
def test_sync_to_s3_twice(s3, tmp_path: Path, llmtap_home: Path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    upgrade(engine)
    config = tmp_path / "config.toml"
    lines = ["[lake]", 'warehouse = "s3://lake/llmtap"'] + [f'"{k}" = "{v}"' for k, v in s3.items()]
    config.write_text("\n".join(lines) + "\n")
    command = [sys.executable, "-m", "llmtap.cli.main", "lake", "sync", "--db", url, "--config", str(config)]
    try:
        write(engine, tmp_path / "spool", 0, 25)
        first = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT)
        assert first.returncode == 0, first.stderr
        assert "llmtap.exchanges: 25 rows written" in first.stdout
        assert lake_totals(url, "s3://lake/llmtap", s3) == store_totals(engine)
        with engine.begin() as connection:  # a reprice
            connection.execute(text("UPDATE exchanges SET cost_total_pico = cost_total_pico * 2"))
        second = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT)
        assert second.returncode == 0, second.stderr
        assert "llmtap.exchanges: 25 rows written" in second.stdout
        assert lake_totals(url, "s3://lake/llmtap", s3) == store_totals(engine)
        assert SECRET not in first.stdout + first.stderr + second.stdout + second.stderr
    finally:
        engine.dispose()


def test_a_warehouse_that_is_not_s3_or_a_folder_is_one_line(tmp_path: Path, llmtap_home: Path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "llmtap.cli.main", "lake", "sync", "--db", url, "--warehouse", "gs://x/y"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unsupported warehouse" in done.stderr


@pytest.mark.slow
def test_a_custom_endpoint_without_a_region_asks_aws_nothing(s3, tmp_path: Path, llmtap_home: Path):
    """With `s3.endpoint` and no `s3.region`, pyiceberg would ask AWS (s3.amazonaws.com)
    for the bucket's region before every sync: a call that leaves for AWS from a store
    whose lake is a local S3 server (and, with no network, a warning and a wait). The
    sync names a region itself (AWS_REGION, else us-east-1), so no call is made."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    upgrade(engine)
    config = tmp_path / "config.toml"
    settings = {k: v for k, v in s3.items() if k != "s3.region"}
    lines = ["[lake]", 'warehouse = "s3://lake/llmtap"'] + [f'"{k}" = "{v}"' for k, v in settings.items()]
    config.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    command = [sys.executable, "-m", "llmtap.cli.main", "lake", "sync", "--db", url, "--config", str(config)]
    try:
        write(engine, tmp_path / "spool", 0, 5)
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)
        assert done.returncode == 0, done.stderr
        assert "llmtap.exchanges: 5 rows written" in done.stdout
        assert "region" not in done.stderr.lower(), done.stderr  # pyiceberg: "Unable to resolve region for bucket"
        assert lake_totals(url, "s3://lake/llmtap", s3) == store_totals(engine)
    finally:
        engine.dispose()
