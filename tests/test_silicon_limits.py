"""Files the serving validation reads are bounded before they are read: a silicon sample (64 MiB, 67,108,864 B)
and a per-point table (8 x that, 512 MiB). Sparse files of the size, so nothing is written to disk."""
import pytest

from perfmodel.errors import SpecError
from perfmodel.serving import silicon_plan, silicon_report


def _sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_a_silicon_sample_over_64_mib_is_refused_naming_the_limit_in_bytes(tmp_path):
    assert silicon_report.MAX_FILE_BYTES == 64 * 1024 * 1024
    with pytest.raises(SpecError, match=r"is 67,108,865 bytes, over the limit of 67,108,864 for a silicon sample"):
        silicon_plan.load(_sparse(tmp_path / "big.csv", 64 * 2**20 + 1))


def test_a_per_point_table_over_512_mib_is_refused_naming_the_limit_in_bytes(tmp_path):
    with pytest.raises(SpecError, match=r"is 600,000,000 bytes, over the limit of 536,870,912"):
        silicon_report.load_points(_sparse(tmp_path / "points.csv", 600_000_000))
