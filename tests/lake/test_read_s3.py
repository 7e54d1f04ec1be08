"""Reports over a lake in S3: `llmtap lake sync` and `llmtap report … --lake s3://…` against
moto's S3 server on 127.0.0.1 (never the network), the S3 settings from the config file's
`[lake]` table; the report over the lake equals the report over the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.analytics import traffic
from tests.analytics.conftest import fill
from tests.helpers import free_port, llmtap

KEY, SECRET = "lake-test-key-id", "lake-test-secret-XYZW"


@pytest.fixture
def s3() -> Iterator[str]:
    """The endpoint of an S3 server on 127.0.0.1 with the bucket `lake`."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET, region_name="us-east-1"
        )
        client.create_bucket(Bucket="lake")
        yield endpoint
    finally:
        server.stop()


def test_a_report_over_a_lake_in_s3_equals_the_store(s3: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    known = traffic.build()
    fill(url, [k.rec for k in known[::2]], tmp_path / "spool1")
    config = tmp_path / "config.toml"
    config.write_text(
        "[lake]\n"
        f'"s3.endpoint" = "{s3}"\n'
        '"s3.region" = "us-east-1"\n'
        f'"s3.access-key-id" = "{KEY}"\n'
        f'"s3.secret-access-key" = "{SECRET}"\n'
    )
    common = ("--db", url, "--config", str(config))
    synced = llmtap("lake", "sync", "--warehouse", "s3://lake/history", *common)
    assert synced.code == 0, synced.err
    fill(url, [k.rec for k in known[1::2]], tmp_path / "spool2")  # a tail the lake lacks

    for kind, by in (("usage", "team,day"), ("cost", "team,model"), ("errors", "provider"), ("tools", "team")):
        over_store = llmtap("report", kind, "--by", by, "--format", "json", *common)
        over_lake = llmtap("report", kind, "--by", by, "--format", "json", "--lake", "s3://lake/history", *common)
        assert over_store.code == 0 and over_lake.code == 0, over_lake.err
        assert over_lake.json() == over_store.json() != []
        assert SECRET not in over_lake.out + over_lake.err
