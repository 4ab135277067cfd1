"""The operator's admin command line: ``castle topics|groups|configs|users|acls|transactions ...``.

What confluent-kafka's AdminClient offers goes through it, so the commands work against
Castle and against any Kafka broker, the way kafka-topics.sh, kafka-consumer-groups.sh and
kafka-configs.sh do. The few APIs librdkafka lacks (partition reassignments, transactions:
ListTransactions, DescribeTransactions, DescribeProducers, WriteTxnMarkers) go over the
Kafka protocol with Castle's own small client (``wire``), to the broker Kafka's Java Admin
would ask.

Modules, one job each:

* ``cli``: argparse wiring, dispatch, exit codes (0 ok, 1 Kafka error, 2 usage error).
* ``session``: one AdminClient per command, the command's deadline, and the translation
  of librdkafka errors into one-line messages.
* ``output``: aligned text tables for people, JSON (orjson) for scripts.
* ``offsets``: committed offsets (OffsetFetch) and log offsets (ListOffsets) by partition.
* ``wire``: Castle's own Kafka client for the APIs the AdminClient lacks (brokers,
  leaders, coordinators found as the Java Admin finds them; librdkafka's security settings).
* ``topics``, ``groups``, ``reset``, ``configs``, ``transactions``: the commands themselves.
"""
