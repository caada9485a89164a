"""Quantities as datasheets write them: every unit perfmodel reads, with its SI value written out here by hand
(GB = 1e9 B and GiB = 2**30 B stay apart; bits per second are an eighth of bytes), and the formatters that
print them back for people."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import units
from perfmodel.units import (fmt_bytes, fmt_bytes_bin, fmt_count, fmt_flops, fmt_rate, fmt_time, parse_count,
                             parse_quantity)

# unit -> (dimension, SI value of one of it): decimal prefixes k/K 1e3 ... E 1e18, binary Ki 2**10 ... Pi 2**50
DEC = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
BIN = {"Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4, "Pi": 1024.0**5}
EXPECTED = {}
for p, f in DEC.items():
    EXPECTED.update({f"{p}B": ("bytes", f), f"{p}B/s": ("bytes/s", f), f"{p}b/s": ("bytes/s", f / 8),
                     f"{p}bps": ("bytes/s", f / 8), f"{p}FLOP/s": ("flop/s", f), f"{p}FLOPS": ("flop/s", f),
                     f"{p}OP/s": ("flop/s", f), f"{p}OPS": ("flop/s", f), f"{p}W": ("W", f)})
for p, f in BIN.items():
    EXPECTED.update({f"{p}B": ("bytes", f), f"{p}B/s": ("bytes/s", f)})
EXPECTED.update({"s": ("s", 1.0), "ms": ("s", 1e-3), "us": ("s", 1e-6), "µs": ("s", 1e-6), "ns": ("s", 1e-9),
                 "bytes": ("bytes", 1.0), "/h": ("USD/h", 1.0), "USD/h": ("USD/h", 1.0), "/hr": ("USD/h", 1.0),
                 "USD/hr": ("USD/h", 1.0), "kW": ("W", 1e3)})


def test_the_unit_table_is_exactly_the_units_written_out_here():
    assert set(units.UNITS) == set(EXPECTED)


@pytest.mark.parametrize("unit", sorted(EXPECTED))
def test_each_unit_reads_as_its_si_value(unit):
    dim, factor = EXPECTED[unit]
    assert parse_quantity(f"3 {unit}", dim) == 3.0 * factor  # the same product: equal to the last bit
    assert parse_quantity(f"3{unit}", dim) == 3.0 * factor


def test_datasheet_figures_read_as_the_datasheets_mean_them():
    assert parse_quantity("80 GB", "bytes") == 80e9
    assert parse_quantity("80 GiB", "bytes") == 80 * 2**30  # 85.9e9: not the same as 80 GB
    assert parse_quantity("3.35 TB/s", "bytes/s") == pytest.approx(3.35e12)
    assert parse_quantity("400 Gb/s", "bytes/s") == pytest.approx(50e9)  # a network link: bits
    assert parse_quantity("989 TFLOP/s", "flop/s") == pytest.approx(989e12)
    assert parse_quantity("700 W", "W") == 700.0
    assert parse_quantity("1.2 kW", "W") == pytest.approx(1200.0)
    assert parse_quantity("2.49/h", "USD/h") == pytest.approx(2.49)
    assert parse_quantity("$2.49/h", "USD/h") == pytest.approx(2.49)
    assert parse_quantity(4096, "bytes") == 4096.0  # a bare number is already SI


@pytest.mark.parametrize("text,dim,why", [("80 GB", "bytes/s", "is a bytes quantity"), ("80 XB", "bytes", "unknown unit"),
                                          ("0 GB", "bytes", "positive"), ("-1 GB", "bytes", "positive"),
                                          ("inf GB", "bytes", "cannot read"), ("８０ GB", "bytes", "cannot read"),
                                          (True, "bytes", "boolean"), ([80], "bytes", "got list")])
def test_a_quantity_that_is_not_one_says_why(text, dim, why):
    with pytest.raises(ValueError, match=why):
        parse_quantity(text, dim)


def test_zero_is_read_only_where_it_is_allowed():
    assert parse_quantity("0 s", "s", allow_zero=True) == 0.0
    with pytest.raises(ValueError):
        parse_quantity("0 s", "s")


@pytest.mark.parametrize("text,value", [("4096", 4096.0), ("1e6", 1e6), ("128k", 128e3), ("128K", 128e3),
                                        ("1M", 1e6), ("2G", 2e9), ("128Ki", 131072.0), ("1Mi", 1048576.0),
                                        ("1Gi", 2.0**30), (" 8 k ", 8e3), (512, 512.0)])
def test_counts_take_si_and_binary_prefixes_apart(text, value):
    assert parse_count(text) == value


def test_a_count_that_is_not_one_says_how_to_write_it():
    with pytest.raises(ValueError, match="128Ki"):
        parse_count("128 KiB")


@pytest.mark.parametrize("f,x,text", [(fmt_bytes, 80e9, "80 GB"), (fmt_bytes, 999.0, "999 B"), (fmt_bytes, 1000.0, "1 kB"),
                                      (fmt_bytes, 1.5e18, "1.5 EB"), (fmt_bytes, 3e21, "3000 EB"),
                                      (fmt_bytes_bin, 80 * 2**30, "80 GiB"), (fmt_bytes_bin, 1023.0, "1023 B"),
                                      (fmt_bytes_bin, 2.0**50, "1 PiB"), (fmt_rate, 3.35e12, "3.35 TB/s"),
                                      (fmt_flops, 989e12, "989 TFLOP/s"), (fmt_count, 128e3, "128 k"),
                                      (fmt_count, 12.0, "12"), (fmt_bytes, 0.0, "0 B"), (fmt_bytes, math.nan, "-"),
                                      (fmt_time, 2.5, "2.5 s"), (fmt_time, 1.0, "1 s"), (fmt_time, 1e-3, "1 ms"),
                                      (fmt_time, 1e-6, "1 µs"), (fmt_time, 0.0125, "12.5 ms"), (fmt_time, -0.5, "-500 ms"),
                                      (fmt_time, 3e-6, "3 µs"), (fmt_time, 4e-9, "4 ns"), (fmt_time, 1e-12, "0.001 ns"),
                                      (fmt_time, math.inf, "-"), (fmt_bytes, -2e9, "-2 GB")])
def test_quantities_print_with_the_largest_prefix_under_the_base(f, x, text):
    assert f(x) == text


@given(st.floats(1.0, 1e20))
def test_a_printed_byte_count_reads_back_to_four_significant_digits(x):
    assert parse_quantity(fmt_bytes(x), "bytes") == pytest.approx(x, rel=5e-4)
    assert parse_quantity(fmt_bytes_bin(x), "bytes") == pytest.approx(x, rel=5e-4)
