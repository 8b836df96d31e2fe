"""``host:port`` parsing, one rule for --advertise, peers and eventq worker --server."""

import pytest

from eventq.address import host_and_port


def test_host_and_port():
    assert host_and_port("127.0.0.1:9922") == ("127.0.0.1", 9922)
    assert host_and_port("[::1]:9922") == ("::1", 9922)
    assert host_and_port("box.example:1") == ("box.example", 1)


@pytest.mark.parametrize("text", ["nope", ":9922", "host:", "host:0", "host:65536",
                                  "host:+1", "host:x"])
def test_not_an_address(text):
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        host_and_port(text)
