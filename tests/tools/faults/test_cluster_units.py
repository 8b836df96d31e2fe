"""The fault cluster's pure parts: broker listeners and the modes of a broker cut."""

from __future__ import annotations

from tools.faults.cluster import (
    BrokerPorts,
    broker_overrides,
    client_route,
    controller_route,
    gateway_route,
    inter_broker_route,
    isolation_modes,
    owners_from_cluster_page,
    peer_route,
)
from tools.faults.proxy import BLACKHOLE, PASS, ModeChange

PORTS = [BrokerPorts((1000 + 10 * b, 1001 + 10 * b), 1005 + 10 * b, 1006 + 10 * b,
                     1007 + 10 * b) for b in range(3)]
ROUTES = {
    **{client_route(i, b): 2000 + 10 * b + i for b in range(3) for i in range(2)},
    **{inter_broker_route(b): 3000 + b for b in range(3)},
    **{controller_route(a, c): 4000 + 10 * a + c for a in range(3) for c in range(3) if a != c},
}


def test_a_broker_listens_on_its_own_ports_and_advertises_proxy_routes():
    props = broker_overrides(1, PORTS, ROUTES)
    assert props["listeners"] == (
        "P0://127.0.0.1:1010,P1://127.0.0.1:1011,DIRECT://127.0.0.1:1015,"
        "INTERNAL://127.0.0.1:1016,CONTROLLER://127.0.0.1:1017")
    assert props["advertised.listeners"] == (
        "P0://127.0.0.1:2010,P1://127.0.0.1:2011,DIRECT://127.0.0.1:1015,"
        "INTERNAL://127.0.0.1:3001")
    assert props["listener.security.protocol.map"] == (
        "P0:PLAINTEXT,P1:PLAINTEXT,DIRECT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["controller.listener.names"] == "CONTROLLER"


def test_each_node_reaches_the_other_controllers_through_its_own_routes():
    assert broker_overrides(0, PORTS, ROUTES)["controller.quorum.voters"] == (
        "1@127.0.0.1:1007,2@127.0.0.1:4001,3@127.0.0.1:4002")
    assert broker_overrides(2, PORTS, ROUTES)["controller.quorum.voters"] == (
        "1@127.0.0.1:4020,2@127.0.0.1:4021,3@127.0.0.1:1027")


def by_route(changes: list[ModeChange]) -> dict[str, tuple]:
    return {c.name: (c.mode, None if c.only_pids is None else set(c.only_pids))
            for c in changes}


def test_no_cut_means_every_broker_route_passes():
    modes = by_route(isolation_modes(set(), {0: 10, 1: 11, 2: 12}))
    assert len(modes) == 6 + 3
    assert {mode for mode, _ in modes.values()} == {PASS}


def test_cutting_one_broker_off_blackholes_its_paths_both_ways():
    modes = by_route(isolation_modes({2}, {0: 10, 1: 11, 2: 12}))
    assert modes[controller_route(0, 1)] == (PASS, None)
    assert modes[controller_route(1, 0)] == (PASS, None)
    for other in (0, 1):
        assert modes[controller_route(2, other)] == (BLACKHOLE, None)
        assert modes[controller_route(other, 2)] == (BLACKHOLE, None)
        # Broker 2's fetches from the others: only its own connections.
        assert modes[inter_broker_route(other)] == (BLACKHOLE, {12})
    # The others' fetches from broker 2 (nobody else uses its route).
    assert modes[inter_broker_route(2)] == (BLACKHOLE, None)


def test_cutting_two_brokers_off_separates_all_three():
    modes = by_route(isolation_modes({0, 2}, {0: 10, 1: 11, 2: 12}))
    assert {mode for name, (mode, _) in modes.items() if "controller" in name} == {BLACKHOLE}
    assert modes[inter_broker_route(0)] == (BLACKHOLE, None)
    assert modes[inter_broker_route(1)] == (BLACKHOLE, {10, 12})
    assert modes[inter_broker_route(2)] == (BLACKHOLE, None)


def test_a_dead_broker_has_no_pid_to_cut():
    modes = by_route(isolation_modes({2}, {0: 10, 1: 11, 2: None}))
    assert modes[inter_broker_route(0)] == (PASS, None)
    assert modes[inter_broker_route(2)] == (BLACKHOLE, None)


def test_partition_owners_from_the_dashboards_cluster_page():
    html = ('<table id="partitions"><tr><th>partition</th></tr>'
            '<tr><td class="l">0</td><td class="l">127.0.0.1:4100 (this process)</td>'
            '<td>5</td></tr><tr><td class="l">1</td><td class="l">127.0.0.1:4200</td></tr>'
            '<tr><td class="l">2</td><td class="l">?</td></tr></table>')
    assert owners_from_cluster_page(html) == {0: 4100, 1: 4200}


def test_gateways_have_a_route_for_clients_and_one_for_peers():
    assert gateway_route(3) == "client->proc3"
    assert peer_route(3) == "peer->proc3"
    assert {gateway_route(0), peer_route(0)}.isdisjoint(ROUTES)  # not Kafka's routes


def test_a_spare_slot_has_its_listener_on_every_broker():
    spare = [BrokerPorts((1000, 1001, 1002), 1005, 1006, 1007)] * 3
    routes = {**ROUTES, **{client_route(2, b): 2100 + b for b in range(3)}}
    props = broker_overrides(0, spare, routes)
    assert "P2://127.0.0.1:1002" in props["listeners"]
    assert "P2://127.0.0.1:2100" in props["advertised.listeners"]
