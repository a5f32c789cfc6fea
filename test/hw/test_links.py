"""The link model (cann/hw/links.py, clusters/Atlas800.toml): link type by placement, alpha-beta time."""

import pytest

from cann.errors import CannError
from cann.hw.links import available_clusters, load_cluster


def test_atlas800_links():
    c = load_cluster("Atlas800")
    assert available_clusters() == ["Atlas800"]
    assert (c.devices_per_server, c.group_size) == (8, 4)
    assert c.link("hccs").bandwidth == 30e9  # 240 Gb/s per HCCS link
    assert c.link_between(0, 3).name == "hccs"
    assert c.link_between(3, 4).name == "pcie"
    assert c.link_between(7, 8).name == "roce"
    assert c.link_between(9, 10).name == "hccs"


def test_alpha_beta():
    hccs = load_cluster().link("hccs")
    assert hccs.time(0) == 0.0
    assert hccs.time(30_000) == pytest.approx(2e-6 + 1e-6)


def test_unknown_cluster():
    with pytest.raises(CannError, match=r"unknown cluster 'DGX' \(known: Atlas800\)"):
        load_cluster("DGX")
