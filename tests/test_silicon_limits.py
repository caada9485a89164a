"""Files the serving validation reads are bounded before they are read: a silicon sample (64 MiB, 67,108,864 B)
and a per-point table (8 x that, 512 MiB). Sparse files of the size, so nothing is written to disk. A device or a
FIFO has no size to check, so it is refused as such: /dev/zero read as a CSV grew without end (a fuzz draw took
20 GB in 80 s)."""
import os

import pytest

from perfmodel.errors import SpecError
from perfmodel.serving import silicon_plan, silicon_report


def _sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_a_silicon_sample_over_64_mib_is_refused_naming_the_limit_in_bytes(tmp_path):
    assert silicon_report.MAX_FILE_BYTES == 64 * 1024 * 1024
    with pytest.raises(SpecError, match=r"is 67,108,865 bytes, over the 67,108,864-byte limit of a silicon sample"):
        silicon_plan.load(_sparse(tmp_path / "big.csv", 64 * 2**20 + 1))


def test_a_per_point_table_over_512_mib_is_refused_naming_the_limit_in_bytes(tmp_path):
    with pytest.raises(SpecError, match=r"is 600,000,000 bytes, over the 536,870,912-byte limit of a points table"):
        silicon_report.load_points(_sparse(tmp_path / "points.csv", 600_000_000))


@pytest.mark.parametrize("read", [silicon_plan.load, silicon_report.load_points,
                                  lambda p: silicon_report.compare(None, p)], ids=["sample", "points", "peer"])
def test_a_device_or_a_fifo_given_as_a_csv_is_refused_before_it_is_read(read, tmp_path):
    with pytest.raises(SpecError, match=r"^/dev/zero: it is not a regular file \(a device, FIFO or socket"):
        read("/dev/zero")
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # nobody writes it: opening it to read would wait forever
    with pytest.raises(SpecError, match="is not a regular file"):
        read(fifo)


@pytest.mark.parametrize("read", [silicon_plan.load, silicon_report.load_points], ids=["sample", "points"])
def test_a_file_that_is_not_csv_text_is_one_error_naming_it(read, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"id,isl\n\xff\xfe\n")
    with pytest.raises(SpecError, match=r"bad.csv: it is not UTF-8 text \(byte 7\)"):
        read(bad)
    bad.write_text('id,"isl\n1,2\n')
    with pytest.raises(SpecError, match=r"bad.csv: is not a readable CSV \(Error tokenizing data"):
        read(bad)


def test_a_peer_csv_may_be_as_large_as_a_points_table_and_no_larger(tmp_path, monkeypatch):
    """A peer's per-point CSV (bench/aic_silicon.py's) is bounded as a points table is, at 8 x the sample's limit:
    with the limit cut to 1,000 B, a peer file just under 8,000 bytes is read and compared, one over it refused."""
    from pathlib import Path

    import pandas as pd

    shipped = Path(__file__).resolve().parent.parent / "docs" / "validation" / "serving" / "points.csv"
    points = pd.read_csv(shipped, nrows=40, dtype={"id": str, "workers": str})
    monkeypatch.setattr(silicon_report, "MAX_FILE_BYTES", 1000)
    peer = tmp_path / "peer.csv"
    rows = [f"{i},{t:.1f},{p:.2f}\n" for i, t, p in zip(points["id"], points["measured_ttft_ms"], points["measured_tpot_ms"])]
    text = "id,aic_ttft_ms,aic_tpot_ms\n" + "".join(rows)
    while len(text) + len(rows[0]) <= 8000:
        text += rows[0]
    peer.write_text(text)
    assert 7800 < peer.stat().st_size <= 8000
    out = silicon_report.compare(points, peer)
    assert len(out) and (out["points"] > 0).all()
    peer.write_text(text + rows[0])
    assert peer.stat().st_size > 8000
    with pytest.raises(SpecError, match=r"over the 8,000-byte limit of a peer CSV"):
        silicon_report.compare(points, peer)
