"""Suite-wide fixtures: one real Kafka broker for the whole session.

The broker is started from the project's Maven jars on free loopback ports in a temp
dir, unless ``EVENTQ_KAFKA_BOOTSTRAP`` names an existing broker. Tests get their own
topic names, so they never see each other's records.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import itertools
import json
import os
import re
import signal

import pytest
from hypothesis import HealthCheck, settings

from eventq.run.localkafka import broker
from support.beside import BOARD_INPUT, CHAIN_KEY, Chain, board_of
from support.shared import SHARED_KEY, SHARED_STOP_ORDER, Shared, shared, uses
from tools.servers import test_broker_config, test_cluster_configs

# The suite shares two cores with its brokers and the soak beside it: a slow example or
# a slow draw is the machine's, not the code's (CI, 2026-11-26: "Input generation is
# slow: 6 valid inputs after 1.64 s" for a strategy that draws in a millisecond).
settings.register_profile("eventq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("eventq")


@pytest.hookimpl(trylast=True)  # after -k and -m deselected what they do
def pytest_collection_modifyitems(session, config, items) -> None:
    """Tests marked ``beside`` (the soak, tests/e2e/test_soak.py; the fixed fault
    campaign run, tests/e2e/test_fault_campaign.py) run beside the rest of the suite:
    the modules' works start now, one after another in ``BESIDE_ORDER``
    (tests/support/beside.py), and their tests move to the end, where they collect the
    outcomes (a 7-minute soak costs the suite no time of its own). Their works take a
    share of the two cores all along, so what runs beside must be worth it: the
    100,000-job Spark DAG, 9 minutes of a busy machine, is bench/dag_bench.py's."""
    beside = [item for item in items if item.get_closest_marker("beside")]
    if not beside or config.option.collectonly:
        return
    for item in beside:
        items.remove(item)
        items.append(item)
    modules = sorted({item.module.__name__: item.module for item in beside}.values(),
                     key=lambda module: module.BESIDE_ORDER)
    board = board_of(config)
    if board is not None:  # an xdist worker: the controller starts the chain (below)
        worker = config.workerinput["workerid"]
        (board / f"selected-{worker}.json").write_text(json.dumps(
            [{"name": module.__name__, "path": module.__file__} for module in modules]))
        return
    config.stash[CHAIN_KEY] = Chain([(module.__name__, _start_of(config, module.__name__,
                                                                  module))
                                     for module in modules])


def _start_of(config, name: str, module):
    directory = config._tmp_path_factory.mktemp(name.rpartition(".")[2])
    return lambda: module.start_beside(directory)


# Under xdist (``make test``: two workers, ``--dist loadgroup``) the tests that share a
# costly session fixture run in one worker, so there is one Spark and one three-broker
# cluster, not one per worker; every other test goes with its module, whose server
# (``one_server``) then starts once. The shared groups are scheduled first: they are the
# longest, and a long group started last would be the run's tail.
SHARED_FIXTURE_GROUPS = {"spark": "spark", "kafka_cluster": "kafka-cluster",
                         "eventq_cluster": "kafka-cluster"}
BESIDE_GROUP = "beside"  # they only wait for the chain: one worker waits, at the end


def _xdist_group(item) -> str:
    if item.get_closest_marker("beside"):
        return BESIDE_GROUP
    for fixture, group in SHARED_FIXTURE_GROUPS.items():
        if uses(item, fixture):
            return group
    return item.module.__name__


class Groups:
    """Marks each test with its xdist group, and puts the shared groups first, each in
    one run (without xdist too, so a ``Shared`` resource starts once)."""

    @pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
    def pytest_collection_modifyitems(self, items) -> None:
        groups = {item: _xdist_group(item) for item in items}
        first = list(dict.fromkeys(SHARED_FIXTURE_GROUPS.values()))
        items.sort(key=lambda item: first.index(groups[item]) if groups[item] in first
                   else len(first))  # stable: the others keep their order
        for item in items:
            item.add_marker(pytest.mark.xdist_group(groups[item]))


class BesideOnController:
    """The chain of works beside the suite, run by xdist's controller (tests/support/beside.py):
    it tells each worker the board, learns from the first worker's collection which
    modules' works to start, and starts them."""

    def __init__(self, config) -> None:
        self.config = config
        self.board = None
        self.chain: Chain | None = None

    def pytest_configure_node(self, node) -> None:  # xdist's hooks: called only under -n
        if self.board is None:
            self.board = self.config._tmp_path_factory.mktemp("beside-board")
        node.workerinput[BOARD_INPUT] = str(self.board)

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if self.board is None or self.chain is not None:
            return
        selected = self.board / f"selected-{node.gateway.id}.json"
        if not selected.exists():
            return
        starts = []
        for entry in json.loads(selected.read_text()):
            spec = importlib.util.spec_from_file_location(
                "controller_" + entry["name"].replace(".", "_"), entry["path"])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            starts.append((entry["name"], _start_of(self.config, entry["name"], module)))
        self.chain = Chain(starts, board=self.board)


def pytest_configure(config) -> None:
    _take_ctrl_c()
    config.stash[SHARED_KEY] = _shared_resources(config)
    config.pluginmanager.register(Groups(), "eventq-groups")
    if not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(BesideOnController(config), "eventq-beside")


def _take_ctrl_c() -> None:
    """Tests press Ctrl-C (SIGINT) in the commands they run, as a user's terminal does.
    A suite started in the background of a non-interactive shell (`make test &` in a
    script) has SIGINT ignored, and every process it starts would inherit that: Python
    then installs no handler, and a command waits through Ctrl-C for ever. With a
    handler of its own here, its children start with the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _docker_engine_answers() -> bool:
    try:
        import docker  # type: ignore[import-not-found]

        docker.from_env(timeout=2).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory):
    """Bootstrap servers of a real broker for this test session."""
    existing = os.environ.get("EVENTQ_KAFKA_BOOTSTRAP")
    if existing:
        yield existing
        return
    if os.environ.get("EVENTQ_TEST_BROKER") == "docker" and _docker_engine_answers():
        from testcontainers.kafka import KafkaContainer  # type: ignore[import-not-found]

        with KafkaContainer().with_kraft() as container:
            yield container.get_bootstrap_server()
        return
    config = test_broker_config(tmp_path_factory.mktemp("kafka"))
    broker.start(config)
    try:
        yield config.bootstrap
    finally:
        broker.stop(config)


_topic_counter = itertools.count()


@pytest.fixture
def topic_prefix(request) -> str:
    """A topic-name prefix unique to this test (and this run)."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:80].strip("-")
    return f"t{os.getpid()}-{next(_topic_counter)}-{name}"


@pytest.fixture(scope="module")
def server(one_server):
    """The server a test module talks to: one process (a module may override this to
    run against several, as tests/e2e/test_workq_e2e.py does)."""
    return one_server


@pytest.fixture(scope="module")
def one_server(kafka_bootstrap, tmp_path_factory, request):
    """One running `eventq serve` shared by a test module (tests use their own names)."""
    from tools.servers import ServerProcess

    prefix = re.sub(r"[^A-Za-z0-9]+", "-", request.module.__name__)[-40:].strip("-")
    process = ServerProcess(
        kafka_bootstrap, f"m{os.getpid()}-{prefix}", tmp_path_factory.mktemp("server")
    )
    process.create_topics()
    process.start()
    yield process
    code = process.stop()
    print(process.log_tail(20))
    assert code == 0, f"eventq serve did not stop cleanly ({code}):\n{process.log_tail()}"


@pytest.fixture
def own_broker(tmp_path):
    """A broker of this test's own, which it may kill, stop and start (the session
    broker must stay up for everyone else)."""
    config = test_broker_config(tmp_path / "kafka")
    broker.start(config)
    yield config
    broker.stop(config)


@pytest.fixture
def kafka_cluster(request):
    """Three KRaft brokers (all controller voters) for the scale-out tests
    (docs/architecture.md, "Several brokers"), shared by the tests that use them (see
    ``Shared``). Tests must not kill them (the fault campaign's cluster is one to kill:
    tools/faults/cluster.py)."""
    return broker.cluster_bootstrap(shared(request.config, "kafka_cluster").get())


def end_test_cluster(configs) -> None:
    """Three test brokers gone, their data thrown away: killed, not stopped. Stopped one
    by one, the last waits out its whole stop timeout (30 s) for a controlled shutdown
    the quorum, two voters gone, can no longer grant (docs/architecture.md, "Several
    brokers")."""
    for config in configs:
        broker.kill(config)


@pytest.fixture
def eventq_cluster(request, kafka_cluster):
    """Three `eventq serve` processes of one app on the shared broker cluster, shared by
    the tests that use them (tests use their own queue names): a client of any one
    reaches jobs that live on all three."""
    return shared(request.config, "eventq_cluster").get()


def _shared_resources(config) -> dict[str, Shared]:
    from tools.servers import EventqCluster

    def start_brokers():
        configs = test_cluster_configs(config._tmp_path_factory.mktemp("kafka-cluster"))
        broker.start_cluster(configs)
        return configs

    def stop_brokers(configs):
        end_test_cluster(configs)

    def start_processes():
        bootstrap = broker.cluster_bootstrap(resources["kafka_cluster"].get())
        directory = config._tmp_path_factory.mktemp("cluster")
        return EventqCluster(bootstrap, f"c{os.getpid()}", directory).start()

    def stop_processes(cluster):
        # All at once: one by one, each departure moves partitions to the others, which
        # the next stop then waits for.
        with concurrent.futures.ThreadPoolExecutor(len(cluster.processes)) as pool:
            codes = list(pool.map(lambda process: process.stop(), cluster.processes))
        for process in cluster.processes:
            print(process.log_tail(10))
        assert codes == [0, 0, 0], f"a process did not stop cleanly: {codes}"

    sigint_before: list = []

    def start_spark():
        from eventq.spark.session import SparkOptions, spark_session

        # pyspark's SparkContext puts its own SIGINT handler in (it cancels the running
        # jobs) and leaves it after stop, when it fails with AttributeError instead of
        # KeyboardInterrupt; the tests run after Spark's in this process press Ctrl-C.
        sigint_before.append(signal.getsignal(signal.SIGINT))
        return spark_session(SparkOptions(app_name="eventq-tests"))

    def stop_spark(started):
        session, created = started
        if created:
            session.stop()
        signal.signal(signal.SIGINT, sigint_before.pop())

    resources = {"kafka_cluster": Shared(start_brokers, stop_brokers),
                 "eventq_cluster": Shared(start_processes, stop_processes),
                 "spark": Shared(start_spark, stop_spark)}
    return resources


@pytest.hookimpl(trylast=True)  # after the item's own fixtures are torn down
def pytest_runtest_teardown(item, nextitem) -> None:
    for name in SHARED_STOP_ORDER:
        if uses(item, name) and not (nextitem is not None and uses(nextitem, name)):
            shared(item.config, name).end()


def pytest_sessionfinish(session) -> None:
    if SHARED_KEY in session.config.stash:
        for name in SHARED_STOP_ORDER:
            shared(session.config, name).end()
