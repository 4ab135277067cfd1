"""Micro-benchmarks of Castle's internals, run by hand (figures: docs/BENCHMARKS.md).

The only part of loadtest/ that imports broker, storage or coordination; the rest talks
to a broker over the wire (tests/unit/broker/test_static.py holds that line).

* ``bench_storage``: PartitionLog append throughput and read lookups, no network.
* ``produce_cost``, ``fetch_cost`` (with ``codec_cost``): a worker's CPU per Produce and
  Fetch request for the codec steps, on one in-memory request.
* ``bench_guard``: the request-length guard beside kio's decode.
* ``request_cost``: a running broker's CPU per small Produce over one raw connection;
  ``--floor`` measures ``answer_floor``, a uvloop server that only answers, instead.
"""
