import pytest

from crawler_lib.netguard import AddressGuard, BlockedAddress, classify


@pytest.mark.parametrize("address, reason", [
    ("169.254.169.254", "metadata_address"), ("fd00:ec2::254", "metadata_address"),
    ("100.100.100.200", "metadata_address"),
    ("127.0.0.1", "loopback_address"), ("::1", "loopback_address"), ("::ffff:127.0.0.1", "loopback_address"),
    ("10.1.2.3", "private_address"), ("172.16.0.1", "private_address"), ("192.168.1.1", "private_address"),
    ("fc00::1", "private_address"), ("169.254.1.1", "link_local_address"), ("fe80::1", "link_local_address"),
    ("224.0.0.1", "multicast_address"), ("0.0.0.0", "unspecified_address"), ("100.64.0.1", "reserved_address"),
    ("8.8.8.8", None), ("2606:4700::1111", None),
])
def test_classify(address, reason):
    assert classify(address) == reason


def test_allow_networks_exempt_only_their_range():
    guard = AddressGuard(["127.0.0.2/32"])
    assert guard.refusal("127.0.0.2") is None
    assert guard.refusal("127.0.0.3") == "loopback_address"
    assert guard.refusal("10.0.0.1") == "private_address"


def test_socket_factory_refuses_before_creating_a_socket():
    import socket

    guard = AddressGuard([])
    with pytest.raises(BlockedAddress):
        guard.socket_factory((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80)))
