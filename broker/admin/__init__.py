"""The operator's admin command line: ``castle topics|groups|configs ...``.

Everything that goes over the network goes through confluent-kafka's AdminClient (and
nothing else), so the commands work against Castle and against any Kafka broker, the way
kafka-topics.sh, kafka-consumer-groups.sh and kafka-configs.sh do.

Modules, one job each:

* ``cli``: argparse wiring, dispatch, exit codes (0 ok, 1 Kafka error, 2 usage error).
* ``session``: one AdminClient per command, the command's deadline, and the translation
  of librdkafka errors into one-line messages.
* ``output``: aligned text tables for people, JSON (orjson) for scripts.
* ``offsets``: committed offsets (OffsetFetch) and log offsets (ListOffsets) by partition.
* ``topics``, ``groups``, ``reset``, ``configs``: the commands themselves.
"""
