"""The request types each handler takes: the union of kio's request classes over the versions
Castle serves (broker/dispatch.py registers the ranges; tests/unit/protocol/test_request_types.py
checks that every union covers exactly them). mypy then checks a handler's field accesses
against every version it may get; a field that only some versions have is read with getattr.

Produce and Fetch are decoded by hand (produce_request.py, fetch_request.py) and typed there.

Handlers import these names under ``if TYPE_CHECKING``: this module imports ~200 kio schema
modules (0.65 s), which a broker loads one by one as requests first need them.
"""

from __future__ import annotations

from typing import Union

from kio.schema.add_offsets_to_txn.v0.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV0
from kio.schema.add_offsets_to_txn.v1.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV1
from kio.schema.add_offsets_to_txn.v2.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV2
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV3
from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV4
from kio.schema.add_partitions_to_txn.v0.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV0
from kio.schema.add_partitions_to_txn.v1.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV1
from kio.schema.add_partitions_to_txn.v2.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV2
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV3
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV4
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV5
from kio.schema.alter_client_quotas.v0.request import AlterClientQuotasRequest as _AlterClientQuotasRequestV0
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest as _AlterClientQuotasRequestV1
from kio.schema.alter_configs.v0.request import AlterConfigsRequest as _AlterConfigsRequestV0
from kio.schema.alter_configs.v1.request import AlterConfigsRequest as _AlterConfigsRequestV1
from kio.schema.alter_configs.v2.request import AlterConfigsRequest as _AlterConfigsRequestV2
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest as _AlterPartitionReassignmentsRequestV0,
)
from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest as _AlterPartitionReassignmentsRequestV1,
)
from kio.schema.alter_replica_log_dirs.v1.request import AlterReplicaLogDirsRequest as _AlterReplicaLogDirsRequestV1
from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest as _AlterReplicaLogDirsRequestV2
from kio.schema.alter_share_group_offsets.v0.request import AlterShareGroupOffsetsRequest as _AlterShareGroupOffsetsRequestV0
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest as AlterUserScramCredentialsRequest,
)
from kio.schema.api_versions.v0.request import ApiVersionsRequest as _ApiVersionsRequestV0
from kio.schema.api_versions.v1.request import ApiVersionsRequest as _ApiVersionsRequestV1
from kio.schema.api_versions.v2.request import ApiVersionsRequest as _ApiVersionsRequestV2
from kio.schema.api_versions.v3.request import ApiVersionsRequest as _ApiVersionsRequestV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as _ApiVersionsRequestV4
from kio.schema.consumer_group_describe.v0.request import (
    ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV0,
)
from kio.schema.consumer_group_describe.v1.request import (
    ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV1,
)
from kio.schema.consumer_group_heartbeat.v0.request import (
    ConsumerGroupHeartbeatRequest as _ConsumerGroupHeartbeatRequestV0,
)
from kio.schema.consumer_group_heartbeat.v1.request import (
    ConsumerGroupHeartbeatRequest as _ConsumerGroupHeartbeatRequestV1,
)
from kio.schema.create_partitions.v0.request import CreatePartitionsRequest as _CreatePartitionsRequestV0
from kio.schema.create_partitions.v1.request import CreatePartitionsRequest as _CreatePartitionsRequestV1
from kio.schema.create_partitions.v2.request import CreatePartitionsRequest as _CreatePartitionsRequestV2
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest as _CreatePartitionsRequestV3
from kio.schema.create_topics.v2.request import CreateTopicsRequest as _CreateTopicsRequestV2
from kio.schema.create_topics.v3.request import CreateTopicsRequest as _CreateTopicsRequestV3
from kio.schema.create_topics.v4.request import CreateTopicsRequest as _CreateTopicsRequestV4
from kio.schema.create_topics.v5.request import CreateTopicsRequest as _CreateTopicsRequestV5
from kio.schema.create_topics.v6.request import CreateTopicsRequest as _CreateTopicsRequestV6
from kio.schema.create_topics.v7.request import CreateTopicsRequest as _CreateTopicsRequestV7
from kio.schema.delete_groups.v0.request import DeleteGroupsRequest as _DeleteGroupsRequestV0
from kio.schema.delete_groups.v1.request import DeleteGroupsRequest as _DeleteGroupsRequestV1
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest as _DeleteGroupsRequestV2
from kio.schema.delete_records.v0.request import DeleteRecordsRequest as _DeleteRecordsRequestV0
from kio.schema.delete_records.v1.request import DeleteRecordsRequest as _DeleteRecordsRequestV1
from kio.schema.delete_records.v2.request import DeleteRecordsRequest as _DeleteRecordsRequestV2
from kio.schema.delete_share_group_offsets.v0.request import DeleteShareGroupOffsetsRequest as _DeleteShareGroupOffsetsRequestV0
from kio.schema.delete_share_group_state.v0.request import (
    DeleteShareGroupStateRequest as _DeleteShareGroupStateRequestV0,
)
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as _DeleteTopicsRequestV1
from kio.schema.delete_topics.v2.request import DeleteTopicsRequest as _DeleteTopicsRequestV2
from kio.schema.delete_topics.v3.request import DeleteTopicsRequest as _DeleteTopicsRequestV3
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest as _DeleteTopicsRequestV4
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as _DeleteTopicsRequestV5
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest as _DeleteTopicsRequestV6
from kio.schema.describe_client_quotas.v0.request import DescribeClientQuotasRequest as _DescribeClientQuotasRequestV0
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest as _DescribeClientQuotasRequestV1
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest as _DescribeClusterRequestV0
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest as _DescribeClusterRequestV1
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest as _DescribeClusterRequestV2
from kio.schema.describe_configs.v1.request import DescribeConfigsRequest as _DescribeConfigsRequestV1
from kio.schema.describe_configs.v2.request import DescribeConfigsRequest as _DescribeConfigsRequestV2
from kio.schema.describe_configs.v3.request import DescribeConfigsRequest as _DescribeConfigsRequestV3
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest as _DescribeConfigsRequestV4
from kio.schema.describe_groups.v0.request import DescribeGroupsRequest as _DescribeGroupsRequestV0
from kio.schema.describe_groups.v1.request import DescribeGroupsRequest as _DescribeGroupsRequestV1
from kio.schema.describe_groups.v2.request import DescribeGroupsRequest as _DescribeGroupsRequestV2
from kio.schema.describe_groups.v3.request import DescribeGroupsRequest as _DescribeGroupsRequestV3
from kio.schema.describe_groups.v4.request import DescribeGroupsRequest as _DescribeGroupsRequestV4
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as _DescribeGroupsRequestV5
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as _DescribeGroupsRequestV6
from kio.schema.describe_log_dirs.v1.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV1
from kio.schema.describe_log_dirs.v2.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV2
from kio.schema.describe_log_dirs.v3.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV3
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV4
from kio.schema.describe_log_dirs.v5.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV5
from kio.schema.describe_producers.v0.request import DescribeProducersRequest as _DescribeProducersRequestV0
from kio.schema.describe_share_group_offsets.v0.request import (
    DescribeShareGroupOffsetsRequest as _DescribeShareGroupOffsetsRequestV0,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest as _DescribeShareGroupOffsetsRequestV1,
)
from kio.schema.describe_topic_partitions.v0.request import (
    DescribeTopicPartitionsRequest as _DescribeTopicPartitionsRequestV0,
)
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest as _DescribeTransactionsRequestV0
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest as DescribeUserScramCredentialsRequest,
)
from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as _ElectLeadersRequestV0
from kio.schema.elect_leaders.v1.request import ElectLeadersRequest as _ElectLeadersRequestV1
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as _ElectLeadersRequestV2
from kio.schema.end_txn.v0.request import EndTxnRequest as _EndTxnRequestV0
from kio.schema.end_txn.v1.request import EndTxnRequest as _EndTxnRequestV1
from kio.schema.end_txn.v2.request import EndTxnRequest as _EndTxnRequestV2
from kio.schema.end_txn.v3.request import EndTxnRequest as _EndTxnRequestV3
from kio.schema.end_txn.v4.request import EndTxnRequest as _EndTxnRequestV4
from kio.schema.end_txn.v5.request import EndTxnRequest as _EndTxnRequestV5
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest as _FindCoordinatorRequestV0
from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest as _FindCoordinatorRequestV1
from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest as _FindCoordinatorRequestV2
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as _FindCoordinatorRequestV3
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as _FindCoordinatorRequestV4
from kio.schema.find_coordinator.v5.request import FindCoordinatorRequest as _FindCoordinatorRequestV5
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest as _FindCoordinatorRequestV6
from kio.schema.get_telemetry_subscriptions.v0.request import (
    GetTelemetrySubscriptionsRequest as GetTelemetrySubscriptionsRequest,
)
from kio.schema.heartbeat.v0.request import HeartbeatRequest as _HeartbeatRequestV0
from kio.schema.heartbeat.v1.request import HeartbeatRequest as _HeartbeatRequestV1
from kio.schema.heartbeat.v2.request import HeartbeatRequest as _HeartbeatRequestV2
from kio.schema.heartbeat.v3.request import HeartbeatRequest as _HeartbeatRequestV3
from kio.schema.heartbeat.v4.request import HeartbeatRequest as _HeartbeatRequestV4
from kio.schema.incremental_alter_configs.v0.request import IncrementalAlterConfigsRequest as _IncrementalAlterConfigsRequestV0
from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest as _IncrementalAlterConfigsRequestV1
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest as _InitProducerIdRequestV0
from kio.schema.init_producer_id.v1.request import InitProducerIdRequest as _InitProducerIdRequestV1
from kio.schema.init_producer_id.v2.request import InitProducerIdRequest as _InitProducerIdRequestV2
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as _InitProducerIdRequestV3
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest as _InitProducerIdRequestV4
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest as _InitProducerIdRequestV5
from kio.schema.initialize_share_group_state.v0.request import (
    InitializeShareGroupStateRequest as _InitializeShareGroupStateRequestV0,
)
from kio.schema.join_group.v0.request import JoinGroupRequest as _JoinGroupRequestV0
from kio.schema.join_group.v1.request import JoinGroupRequest as _JoinGroupRequestV1
from kio.schema.join_group.v2.request import JoinGroupRequest as _JoinGroupRequestV2
from kio.schema.join_group.v3.request import JoinGroupRequest as _JoinGroupRequestV3
from kio.schema.join_group.v4.request import JoinGroupRequest as _JoinGroupRequestV4
from kio.schema.join_group.v5.request import JoinGroupRequest as _JoinGroupRequestV5
from kio.schema.join_group.v6.request import JoinGroupRequest as _JoinGroupRequestV6
from kio.schema.join_group.v7.request import JoinGroupRequest as _JoinGroupRequestV7
from kio.schema.join_group.v8.request import JoinGroupRequest as _JoinGroupRequestV8
from kio.schema.join_group.v9.request import JoinGroupRequest as _JoinGroupRequestV9
from kio.schema.leave_group.v0.request import LeaveGroupRequest as _LeaveGroupRequestV0
from kio.schema.leave_group.v1.request import LeaveGroupRequest as _LeaveGroupRequestV1
from kio.schema.leave_group.v2.request import LeaveGroupRequest as _LeaveGroupRequestV2
from kio.schema.leave_group.v3.request import LeaveGroupRequest as _LeaveGroupRequestV3
from kio.schema.leave_group.v4.request import LeaveGroupRequest as _LeaveGroupRequestV4
from kio.schema.leave_group.v5.request import LeaveGroupRequest as _LeaveGroupRequestV5
from kio.schema.list_config_resources.v0.request import ListConfigResourcesRequest as _ListConfigResourcesRequestV0
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest as _ListConfigResourcesRequestV1
from kio.schema.list_groups.v0.request import ListGroupsRequest as _ListGroupsRequestV0
from kio.schema.list_groups.v1.request import ListGroupsRequest as _ListGroupsRequestV1
from kio.schema.list_groups.v2.request import ListGroupsRequest as _ListGroupsRequestV2
from kio.schema.list_groups.v3.request import ListGroupsRequest as _ListGroupsRequestV3
from kio.schema.list_groups.v4.request import ListGroupsRequest as _ListGroupsRequestV4
from kio.schema.list_groups.v5.request import ListGroupsRequest as _ListGroupsRequestV5
from kio.schema.list_offsets.v1.request import ListOffsetsRequest as _ListOffsetsRequestV1
from kio.schema.list_offsets.v2.request import ListOffsetsRequest as _ListOffsetsRequestV2
from kio.schema.list_offsets.v3.request import ListOffsetsRequest as _ListOffsetsRequestV3
from kio.schema.list_offsets.v4.request import ListOffsetsRequest as _ListOffsetsRequestV4
from kio.schema.list_offsets.v5.request import ListOffsetsRequest as _ListOffsetsRequestV5
from kio.schema.list_offsets.v6.request import ListOffsetsRequest as _ListOffsetsRequestV6
from kio.schema.list_offsets.v7.request import ListOffsetsRequest as _ListOffsetsRequestV7
from kio.schema.list_offsets.v8.request import ListOffsetsRequest as _ListOffsetsRequestV8
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest as _ListPartitionReassignmentsRequestV0,
)
from kio.schema.list_transactions.v0.request import ListTransactionsRequest as _ListTransactionsRequestV0
from kio.schema.list_transactions.v1.request import ListTransactionsRequest as _ListTransactionsRequestV1
from kio.schema.list_transactions.v2.request import ListTransactionsRequest as _ListTransactionsRequestV2
from kio.schema.metadata.v0.request import MetadataRequest as _MetadataRequestV0
from kio.schema.metadata.v1.request import MetadataRequest as _MetadataRequestV1
from kio.schema.metadata.v2.request import MetadataRequest as _MetadataRequestV2
from kio.schema.metadata.v3.request import MetadataRequest as _MetadataRequestV3
from kio.schema.metadata.v4.request import MetadataRequest as _MetadataRequestV4
from kio.schema.metadata.v5.request import MetadataRequest as _MetadataRequestV5
from kio.schema.metadata.v6.request import MetadataRequest as _MetadataRequestV6
from kio.schema.metadata.v7.request import MetadataRequest as _MetadataRequestV7
from kio.schema.metadata.v8.request import MetadataRequest as _MetadataRequestV8
from kio.schema.metadata.v9.request import MetadataRequest as _MetadataRequestV9
from kio.schema.metadata.v10.request import MetadataRequest as _MetadataRequestV10
from kio.schema.metadata.v11.request import MetadataRequest as _MetadataRequestV11
from kio.schema.metadata.v12.request import MetadataRequest as _MetadataRequestV12
from kio.schema.offset_commit.v2.request import OffsetCommitRequest as _OffsetCommitRequestV2
from kio.schema.offset_commit.v3.request import OffsetCommitRequest as _OffsetCommitRequestV3
from kio.schema.offset_commit.v4.request import OffsetCommitRequest as _OffsetCommitRequestV4
from kio.schema.offset_commit.v5.request import OffsetCommitRequest as _OffsetCommitRequestV5
from kio.schema.offset_commit.v6.request import OffsetCommitRequest as _OffsetCommitRequestV6
from kio.schema.offset_commit.v7.request import OffsetCommitRequest as _OffsetCommitRequestV7
from kio.schema.offset_commit.v8.request import OffsetCommitRequest as _OffsetCommitRequestV8
from kio.schema.offset_commit.v9.request import OffsetCommitRequest as _OffsetCommitRequestV9
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest as _OffsetDeleteRequestV0
from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as _OffsetFetchRequestV1
from kio.schema.offset_fetch.v2.request import OffsetFetchRequest as _OffsetFetchRequestV2
from kio.schema.offset_fetch.v3.request import OffsetFetchRequest as _OffsetFetchRequestV3
from kio.schema.offset_fetch.v4.request import OffsetFetchRequest as _OffsetFetchRequestV4
from kio.schema.offset_fetch.v5.request import OffsetFetchRequest as _OffsetFetchRequestV5
from kio.schema.offset_fetch.v6.request import OffsetFetchRequest as _OffsetFetchRequestV6
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as _OffsetFetchRequestV7
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as _OffsetFetchRequestV8
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as _OffsetFetchRequestV9
from kio.schema.offset_for_leader_epoch.v2.request import OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV2
from kio.schema.offset_for_leader_epoch.v3.request import OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV3
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV4
from kio.schema.push_telemetry.v0.request import PushTelemetryRequest as PushTelemetryRequest
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest as _ReadShareGroupStateRequestV0
from kio.schema.read_share_group_state_summary.v0.request import (
    ReadShareGroupStateSummaryRequest as _ReadShareGroupStateSummaryRequestV0,
)
from kio.schema.read_share_group_state_summary.v1.request import (
    ReadShareGroupStateSummaryRequest as _ReadShareGroupStateSummaryRequestV1,
)
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as _SaslAuthenticateRequestV0
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest as _SaslAuthenticateRequestV1
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as _SaslAuthenticateRequestV2
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as _SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as _SaslHandshakeRequestV1
from kio.schema.share_acknowledge.v1.request import ShareAcknowledgeRequest as ShareAcknowledgeRequest
from kio.schema.share_fetch.v1.request import ShareFetchRequest as ShareFetchRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest as _ShareGroupDescribeRequestV1
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest as _ShareGroupHeartbeatRequestV1
from kio.schema.sync_group.v0.request import SyncGroupRequest as _SyncGroupRequestV0
from kio.schema.sync_group.v1.request import SyncGroupRequest as _SyncGroupRequestV1
from kio.schema.sync_group.v2.request import SyncGroupRequest as _SyncGroupRequestV2
from kio.schema.sync_group.v3.request import SyncGroupRequest as _SyncGroupRequestV3
from kio.schema.sync_group.v4.request import SyncGroupRequest as _SyncGroupRequestV4
from kio.schema.sync_group.v5.request import SyncGroupRequest as _SyncGroupRequestV5
from kio.schema.txn_offset_commit.v0.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV0
from kio.schema.txn_offset_commit.v1.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV1
from kio.schema.txn_offset_commit.v2.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV2
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV3
from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV4
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV5
from kio.schema.update_features.v0.request import UpdateFeaturesRequest as _UpdateFeaturesRequestV0
from kio.schema.update_features.v1.request import UpdateFeaturesRequest as _UpdateFeaturesRequestV1
from kio.schema.update_features.v2.request import UpdateFeaturesRequest as _UpdateFeaturesRequestV2
from kio.schema.write_share_group_state.v0.request import WriteShareGroupStateRequest as _WriteShareGroupStateRequestV0
from kio.schema.write_share_group_state.v1.request import WriteShareGroupStateRequest as _WriteShareGroupStateRequestV1
from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest as _WriteTxnMarkersRequestV1
from kio.schema.write_txn_markers.v2.request import WriteTxnMarkersRequest as _WriteTxnMarkersRequestV2

# key 2
ListOffsetsRequest = Union[
    _ListOffsetsRequestV1,
    _ListOffsetsRequestV2,
    _ListOffsetsRequestV3,
    _ListOffsetsRequestV4,
    _ListOffsetsRequestV5,
    _ListOffsetsRequestV6,
    _ListOffsetsRequestV7,
    _ListOffsetsRequestV8,
]

# key 3
MetadataRequest = Union[
    _MetadataRequestV0,
    _MetadataRequestV1,
    _MetadataRequestV2,
    _MetadataRequestV3,
    _MetadataRequestV4,
    _MetadataRequestV5,
    _MetadataRequestV6,
    _MetadataRequestV7,
    _MetadataRequestV8,
    _MetadataRequestV9,
    _MetadataRequestV10,
    _MetadataRequestV11,
    _MetadataRequestV12,
]

# key 8
OffsetCommitRequest = Union[
    _OffsetCommitRequestV2,
    _OffsetCommitRequestV3,
    _OffsetCommitRequestV4,
    _OffsetCommitRequestV5,
    _OffsetCommitRequestV6,
    _OffsetCommitRequestV7,
    _OffsetCommitRequestV8,
    _OffsetCommitRequestV9,
]

# key 9
OffsetFetchRequest = Union[
    _OffsetFetchRequestV1,
    _OffsetFetchRequestV2,
    _OffsetFetchRequestV3,
    _OffsetFetchRequestV4,
    _OffsetFetchRequestV5,
    _OffsetFetchRequestV6,
    _OffsetFetchRequestV7,
    _OffsetFetchRequestV8,
    _OffsetFetchRequestV9,
]

# key 10
FindCoordinatorRequest = Union[
    _FindCoordinatorRequestV0,
    _FindCoordinatorRequestV1,
    _FindCoordinatorRequestV2,
    _FindCoordinatorRequestV3,
    _FindCoordinatorRequestV4,
    _FindCoordinatorRequestV5,
    _FindCoordinatorRequestV6,
]

# key 11
JoinGroupRequest = Union[
    _JoinGroupRequestV0,
    _JoinGroupRequestV1,
    _JoinGroupRequestV2,
    _JoinGroupRequestV3,
    _JoinGroupRequestV4,
    _JoinGroupRequestV5,
    _JoinGroupRequestV6,
    _JoinGroupRequestV7,
    _JoinGroupRequestV8,
    _JoinGroupRequestV9,
]

# key 12
HeartbeatRequest = Union[
    _HeartbeatRequestV0,
    _HeartbeatRequestV1,
    _HeartbeatRequestV2,
    _HeartbeatRequestV3,
    _HeartbeatRequestV4,
]

# key 13
LeaveGroupRequest = Union[
    _LeaveGroupRequestV0,
    _LeaveGroupRequestV1,
    _LeaveGroupRequestV2,
    _LeaveGroupRequestV3,
    _LeaveGroupRequestV4,
    _LeaveGroupRequestV5,
]

# key 14
SyncGroupRequest = Union[
    _SyncGroupRequestV0,
    _SyncGroupRequestV1,
    _SyncGroupRequestV2,
    _SyncGroupRequestV3,
    _SyncGroupRequestV4,
    _SyncGroupRequestV5,
]

# key 15
DescribeGroupsRequest = Union[
    _DescribeGroupsRequestV0,
    _DescribeGroupsRequestV1,
    _DescribeGroupsRequestV2,
    _DescribeGroupsRequestV3,
    _DescribeGroupsRequestV4,
    _DescribeGroupsRequestV5,
    _DescribeGroupsRequestV6,
]

# key 16
ListGroupsRequest = Union[
    _ListGroupsRequestV0,
    _ListGroupsRequestV1,
    _ListGroupsRequestV2,
    _ListGroupsRequestV3,
    _ListGroupsRequestV4,
    _ListGroupsRequestV5,
]

# key 18
ApiVersionsRequest = Union[
    _ApiVersionsRequestV0,
    _ApiVersionsRequestV1,
    _ApiVersionsRequestV2,
    _ApiVersionsRequestV3,
    _ApiVersionsRequestV4,
]

# key 19
CreateTopicsRequest = Union[
    _CreateTopicsRequestV2,
    _CreateTopicsRequestV3,
    _CreateTopicsRequestV4,
    _CreateTopicsRequestV5,
    _CreateTopicsRequestV6,
    _CreateTopicsRequestV7,
]

# key 20
DeleteTopicsRequest = Union[
    _DeleteTopicsRequestV1,
    _DeleteTopicsRequestV2,
    _DeleteTopicsRequestV3,
    _DeleteTopicsRequestV4,
    _DeleteTopicsRequestV5,
    _DeleteTopicsRequestV6,
]

# key 21
DeleteRecordsRequest = Union[
    _DeleteRecordsRequestV0,
    _DeleteRecordsRequestV1,
    _DeleteRecordsRequestV2,
]

# key 22
AddPartitionsToTxnRequest = Union[
    _AddPartitionsToTxnRequestV0,
    _AddPartitionsToTxnRequestV1,
    _AddPartitionsToTxnRequestV2,
    _AddPartitionsToTxnRequestV3,
    _AddPartitionsToTxnRequestV4,
    _AddPartitionsToTxnRequestV5,
]

AddOffsetsToTxnRequest = Union[
    _AddOffsetsToTxnRequestV0,
    _AddOffsetsToTxnRequestV1,
    _AddOffsetsToTxnRequestV2,
    _AddOffsetsToTxnRequestV3,
    _AddOffsetsToTxnRequestV4,
]

EndTxnRequest = Union[
    _EndTxnRequestV0,
    _EndTxnRequestV1,
    _EndTxnRequestV2,
    _EndTxnRequestV3,
    _EndTxnRequestV4,
    _EndTxnRequestV5,
]

InitProducerIdRequest = Union[
    _InitProducerIdRequestV0,
    _InitProducerIdRequestV1,
    _InitProducerIdRequestV2,
    _InitProducerIdRequestV3,
    _InitProducerIdRequestV4,
    _InitProducerIdRequestV5,
]

# key 32
DescribeConfigsRequest = Union[
    _DescribeConfigsRequestV1,
    _DescribeConfigsRequestV2,
    _DescribeConfigsRequestV3,
    _DescribeConfigsRequestV4,
]

# key 33
AlterConfigsRequest = Union[
    _AlterConfigsRequestV0,
    _AlterConfigsRequestV1,
    _AlterConfigsRequestV2,
]

# key 37
CreatePartitionsRequest = Union[
    _CreatePartitionsRequestV0,
    _CreatePartitionsRequestV1,
    _CreatePartitionsRequestV2,
    _CreatePartitionsRequestV3,
]

# key 42
DeleteGroupsRequest = Union[
    _DeleteGroupsRequestV0,
    _DeleteGroupsRequestV1,
    _DeleteGroupsRequestV2,
]

# key 44
IncrementalAlterConfigsRequest = Union[
    _IncrementalAlterConfigsRequestV0,
    _IncrementalAlterConfigsRequestV1,
]

# key 28
TxnOffsetCommitRequest = Union[
    _TxnOffsetCommitRequestV0,
    _TxnOffsetCommitRequestV1,
    _TxnOffsetCommitRequestV2,
    _TxnOffsetCommitRequestV3,
    _TxnOffsetCommitRequestV4,
    _TxnOffsetCommitRequestV5,
]

# key 47
OffsetDeleteRequest = Union[
    _OffsetDeleteRequestV0,
]

# key 60
DescribeClusterRequest = Union[
    _DescribeClusterRequestV0,
    _DescribeClusterRequestV1,
    _DescribeClusterRequestV2,
]

# key 45
AlterPartitionReassignmentsRequest = Union[
    _AlterPartitionReassignmentsRequestV0,
    _AlterPartitionReassignmentsRequestV1,
]

# key 46
ListPartitionReassignmentsRequest = Union[
    _ListPartitionReassignmentsRequestV0,
]

# key 43
ElectLeadersRequest = Union[
    _ElectLeadersRequestV0,
    _ElectLeadersRequestV1,
    _ElectLeadersRequestV2,
]

# key 23
OffsetForLeaderEpochRequest = Union[
    _OffsetForLeaderEpochRequestV2,
    _OffsetForLeaderEpochRequestV3,
    _OffsetForLeaderEpochRequestV4,
]

# key 17
SaslHandshakeRequest = Union[
    _SaslHandshakeRequestV0,
    _SaslHandshakeRequestV1,
]

# key 36
SaslAuthenticateRequest = Union[
    _SaslAuthenticateRequestV0,
    _SaslAuthenticateRequestV1,
    _SaslAuthenticateRequestV2,
]

# key 27
WriteTxnMarkersRequest = Union[
    _WriteTxnMarkersRequestV1,
    _WriteTxnMarkersRequestV2,
]

# key 61
DescribeProducersRequest = Union[
    _DescribeProducersRequestV0,
]

# key 65
DescribeTransactionsRequest = Union[
    _DescribeTransactionsRequestV0,
]

# key 66
ListTransactionsRequest = Union[
    _ListTransactionsRequestV0,
    _ListTransactionsRequestV1,
    _ListTransactionsRequestV2,
]

# key 68
ConsumerGroupHeartbeatRequest = Union[
    _ConsumerGroupHeartbeatRequestV0,
    _ConsumerGroupHeartbeatRequestV1,
]

# key 69
ConsumerGroupDescribeRequest = Union[
    _ConsumerGroupDescribeRequestV0,
    _ConsumerGroupDescribeRequestV1,
]

# keys 83-87: the share coordinator's (brokers')
InitializeShareGroupStateRequest = Union[_InitializeShareGroupStateRequestV0]
ReadShareGroupStateRequest = Union[_ReadShareGroupStateRequestV0]
WriteShareGroupStateRequest = Union[
    _WriteShareGroupStateRequestV0,
    _WriteShareGroupStateRequestV1,
]
DeleteShareGroupStateRequest = Union[_DeleteShareGroupStateRequestV0]
ReadShareGroupStateSummaryRequest = Union[
    _ReadShareGroupStateSummaryRequestV0,
    _ReadShareGroupStateSummaryRequestV1,
]
ShareStateRequest = Union[InitializeShareGroupStateRequest, ReadShareGroupStateRequest, WriteShareGroupStateRequest,
                          DeleteShareGroupStateRequest, ReadShareGroupStateSummaryRequest]
# key 90
DescribeShareGroupOffsetsRequest = Union[
    _DescribeShareGroupOffsetsRequestV0,
    _DescribeShareGroupOffsetsRequestV1,
]

# key 91
AlterShareGroupOffsetsRequest = _AlterShareGroupOffsetsRequestV0

# key 92
DeleteShareGroupOffsetsRequest = _DeleteShareGroupOffsetsRequestV0

# key 76 (v1 only)
ShareGroupHeartbeatRequest = _ShareGroupHeartbeatRequestV1

# key 75
DescribeTopicPartitionsRequest = _DescribeTopicPartitionsRequestV0

# key 57
UpdateFeaturesRequest = Union[
    _UpdateFeaturesRequestV0,
    _UpdateFeaturesRequestV1,
    _UpdateFeaturesRequestV2,
]

# key 77 (v1 only)
ShareGroupDescribeRequest = _ShareGroupDescribeRequestV1

# key 34
AlterReplicaLogDirsRequest = Union[
    _AlterReplicaLogDirsRequestV1,
    _AlterReplicaLogDirsRequestV2,
]

# key 35
DescribeLogDirsRequest = Union[
    _DescribeLogDirsRequestV1,
    _DescribeLogDirsRequestV2,
    _DescribeLogDirsRequestV3,
    _DescribeLogDirsRequestV4,
    _DescribeLogDirsRequestV5,
]
# keys 48, 49 (v0-1)
DescribeClientQuotasRequest = Union[_DescribeClientQuotasRequestV0, _DescribeClientQuotasRequestV1]
AlterClientQuotasRequest = Union[_AlterClientQuotasRequestV0, _AlterClientQuotasRequestV1]
# key 74 (v0: ListClientMetricsResources)
ListConfigResourcesRequest = Union[_ListConfigResourcesRequestV0, _ListConfigResourcesRequestV1]

from broker.protocol.acl_requests import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest  # noqa: E402
from broker.protocol.token_requests import (  # noqa: E402
    CreateDelegationTokenRequest,
    DescribeDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)

BY_KEY: dict[int, object] = {
    2: ListOffsetsRequest,
    3: MetadataRequest,
    8: OffsetCommitRequest,
    9: OffsetFetchRequest,
    10: FindCoordinatorRequest,
    11: JoinGroupRequest,
    12: HeartbeatRequest,
    13: LeaveGroupRequest,
    14: SyncGroupRequest,
    15: DescribeGroupsRequest,
    16: ListGroupsRequest,
    17: SaslHandshakeRequest,
    18: ApiVersionsRequest,
    19: CreateTopicsRequest,
    20: DeleteTopicsRequest,
    21: DeleteRecordsRequest,
    22: InitProducerIdRequest,
    24: AddPartitionsToTxnRequest,
    25: AddOffsetsToTxnRequest,
    26: EndTxnRequest,
    29: DescribeAclsRequest,
    30: CreateAclsRequest,
    38: CreateDelegationTokenRequest,
    39: RenewDelegationTokenRequest,
    40: ExpireDelegationTokenRequest,
    41: DescribeDelegationTokenRequest,
    31: DeleteAclsRequest,
    32: DescribeConfigsRequest,
    33: AlterConfigsRequest,
    36: SaslAuthenticateRequest,
    37: CreatePartitionsRequest,
    23: OffsetForLeaderEpochRequest,
    27: WriteTxnMarkersRequest,
    42: DeleteGroupsRequest,
    43: ElectLeadersRequest,
    45: AlterPartitionReassignmentsRequest,
    46: ListPartitionReassignmentsRequest,
    44: IncrementalAlterConfigsRequest,
    47: OffsetDeleteRequest,
    28: TxnOffsetCommitRequest,
    50: DescribeUserScramCredentialsRequest,
    51: AlterUserScramCredentialsRequest,
    60: DescribeClusterRequest,
    61: DescribeProducersRequest,
    65: DescribeTransactionsRequest,
    66: ListTransactionsRequest,
    68: ConsumerGroupHeartbeatRequest,
    69: ConsumerGroupDescribeRequest,
    78: ShareFetchRequest,
    79: ShareAcknowledgeRequest,
    83: InitializeShareGroupStateRequest,
    84: ReadShareGroupStateRequest,
    85: WriteShareGroupStateRequest,
    86: DeleteShareGroupStateRequest,
    87: ReadShareGroupStateSummaryRequest,
    76: ShareGroupHeartbeatRequest,
    77: ShareGroupDescribeRequest,
    90: DescribeShareGroupOffsetsRequest,
    91: AlterShareGroupOffsetsRequest,
    92: DeleteShareGroupOffsetsRequest,
    71: GetTelemetrySubscriptionsRequest,
    72: PushTelemetryRequest,
    74: ListConfigResourcesRequest,
    75: DescribeTopicPartitionsRequest,
    57: UpdateFeaturesRequest,
    35: DescribeLogDirsRequest,
    34: AlterReplicaLogDirsRequest,
    48: DescribeClientQuotasRequest,
    49: AlterClientQuotasRequest,
}

