"""What a Kafka transaction leaves for the other protocols on the embedded store: only committed
messages. A Rog consumer (one message per fetch, at its group's offset) reading a partition
holding committed, aborted and still-open transactions, markers and plain messages gets the
committed and plain ones in order, never a marker, an aborted message or one of an open
transaction, and is not stuck behind what it skips."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running
from protocols.rog import Error, FetchOk, Ok
from tests.helpers.rog_client import RogClient

from .conftest import bootstrap, in_thread


async def test_rog_reads_only_committed_messages(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def produce() -> Producer:
        admin = AdminClient({"bootstrap.servers": servers})
        for f in admin.create_topics([NewTopic("tx-rog", num_partitions=1)]).values():
            f.result(10)
        plain = Producer({"bootstrap.servers": servers})
        tx = Producer({"bootstrap.servers": servers, "transactional.id": "tid-rog"})
        tx.init_transactions(15)
        plain.produce("tx-rog", b"plain-0")
        plain.flush(10)
        tx.begin_transaction()
        tx.produce("tx-rog", b"c-0")
        tx.produce("tx-rog", b"c-1")
        tx.commit_transaction(15)
        for round_ in range(3):  # several aborted batches in a row: all skipped at once
            tx.begin_transaction()
            tx.produce("tx-rog", b"a-%d" % round_)
            tx.flush(10)
            tx.abort_transaction(15)
        tx.begin_transaction()
        tx.produce("tx-rog", b"c-2")
        tx.commit_transaction(15)
        tx.begin_transaction()
        tx.produce("tx-rog", b"open")  # never ended in this test
        tx.flush(10)
        plain.produce("tx-rog", b"plain-1")  # behind the open transaction
        plain.flush(10)
        return tx

    tx = await in_thread(produce)
    rog = RogClient(*gateway.address("rog"))
    got: list[bytes] = []
    for _ in range(10):
        fetched = await rog.fetch("tx-rog", 0, "rog-g")
        if not isinstance(fetched, FetchOk):
            assert isinstance(fetched, Error), fetched  # no data left (yet)
            break
        got.append(fetched.data)
        assert isinstance(await rog.ack("tx-rog", 0, "rog-g"), Ok)
    assert got == [b"plain-0", b"c-0", b"c-1", b"c-2"]

    await in_thread(lambda: tx.commit_transaction(15))
    for _ in range(3):
        fetched = await rog.fetch("tx-rog", 0, "rog-g")
        if not isinstance(fetched, FetchOk):
            break
        got.append(fetched.data)
        assert isinstance(await rog.ack("tx-rog", 0, "rog-g"), Ok)
    assert got[4:] == [b"open", b"plain-1"]
