"""A Jepsen-style fault campaign against eventq. The faults: a TCP fault proxy in its
own process (proxy.py) and a 3-broker KRaft cluster with eventq processes whose every
Kafka connection, and the brokers' traffic among themselves, runs through it
(cluster.py)."""
