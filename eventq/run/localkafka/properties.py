"""What a local Kafka node's JVM is given: its server.properties (KRaft, loopback only,
small and quick; a secured node's listener from eventq/run/localkafka/secured.py) and its
log4j configuration.
"""

from __future__ import annotations

from eventq.kafka.topics import min_insync_replicas
from eventq.limits import KAFKA_MESSAGE_BYTES
from eventq.run.localkafka.config import BrokerConfig, cluster_size
from eventq.run.localkafka.secured import secured, security_properties


def server_properties(config: BrokerConfig) -> dict[str, str]:
    """The broker's configuration: KRaft, loopback only, small and quick. In a cluster
    Kafka's own topics are replicated like eventq's (3 copies, 2 in sync to write)."""
    nodes = cluster_size(config)
    replicas = str(min(nodes, 3))
    min_isr = str(min_insync_replicas(min(nodes, 3)))
    props = {
        "process.roles": "broker,controller",
        "node.id": str(config.node_id),
        # A static quorum: format without --standalone (broker.py, _format_storage).
        "controller.quorum.voters": (
            config.quorum_voters or f"{config.node_id}@{config.host}:{config.controller_port}"
        ),
        "listeners": (
            f"PLAINTEXT://{config.host}:{config.port},"
            f"CONTROLLER://{config.host}:{config.controller_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://{config.host}:{config.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(config.data_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": "8",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.retention.check.interval.ms": "60000",
        "socket.request.max.bytes": str(100 * 1024 * 1024),
        "message.max.bytes": str(KAFKA_MESSAGE_BYTES),  # eventq/limits.py
    }
    if secured(config):
        props.update(security_properties(config))
    if nodes > 1:
        # A dead node's partitions get new leaders once the controller fences it:
        # after 9 s without heartbeats by default (writes to them wait meanwhile;
        # a chaos test saw adds stall 12.4 s). A local cluster fences sooner.
        props["broker.session.timeout.ms"] = "4000"
        props["broker.heartbeat.interval.ms"] = "1000"
    props.update(config.overrides)
    return props


LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log_file}
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.log.LogCleaner=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
"""


def write_config(config: BrokerConfig) -> None:
    config.home.mkdir(parents=True, exist_ok=True)
    lines = [f"{key}={value}" for key, value in sorted(server_properties(config).items())]
    config.properties_file.write_text("\n".join(lines) + "\n")
    config.properties_file.chmod(0o600)  # a secured node's holds its SCRAM password
    config.log4j_file.write_text(LOG4J_PROPERTIES.format(log_file=config.log_file))
