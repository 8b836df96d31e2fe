"""What the gateway is handed has what it asks for (eventq/gateway/ports.py): the real
engine (streams/engine.py), the gateway's stats and the cluster have every member the
protocols name. mypy checks the gateway against the protocols; this checks the
protocols against what the wiring (eventq/run/serve.py) passes."""

from __future__ import annotations

from types import SimpleNamespace

from eventq.gateway import ports
from eventq.gateway.cluster import Cluster
from eventq.gateway.peers import Peers
from eventq.gateway.server import GatewayStats
from eventq.state.indexes import JobIndex
from eventq.state.waiters import Waiters


def real_engine():
    from streams.engine import Engine
    from streams.store import JobStore

    return Engine(commands_topic="t", partitions=1, write_timeout_ms=1000, index=JobIndex(),
                  store=JobStore(None, partitions=1), waiters=Waiters(), node="n")


def test_the_engine_has_every_member_the_gateway_uses() -> None:
    assert isinstance(real_engine(), ports.Engine)


def test_the_stats_and_the_cluster_have_every_member_the_gateway_uses() -> None:
    assert isinstance(GatewayStats(lambda: 0), ports.Stats)
    cluster = Cluster(self_address="a:1", partitions=1, owner_of=lambda _: None,
                      members=lambda: [], peers=Peers(), request_timeout_s=1.0)
    assert isinstance(cluster, ports.Cluster)


def test_a_member_missing_is_seen() -> None:
    engine = real_engine()
    partial = SimpleNamespace(**{name: getattr(engine, name) for name in dir(engine)
                                 if not name.startswith("_") and name != "offers"})
    assert not isinstance(partial, ports.Engine)
    partial.offers = engine.offers
    assert isinstance(partial, ports.Engine)
