"""The request types of the delegation token APIs (broker/apis/delegation_tokens.py), the
versions Kafka 4.4 serves; listed in broker/protocol/requests.py's BY_KEY."""

from __future__ import annotations

from typing import Union

from kio.schema.create_delegation_token.v1.request import CreateDelegationTokenRequest as _CreateV1
from kio.schema.create_delegation_token.v2.request import CreateDelegationTokenRequest as _CreateV2
from kio.schema.create_delegation_token.v3.request import CreateDelegationTokenRequest as _CreateV3
from kio.schema.describe_delegation_token.v1.request import DescribeDelegationTokenRequest as _DescribeV1
from kio.schema.describe_delegation_token.v2.request import DescribeDelegationTokenRequest as _DescribeV2
from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenRequest as _DescribeV3
from kio.schema.expire_delegation_token.v1.request import ExpireDelegationTokenRequest as _ExpireV1
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest as _ExpireV2
from kio.schema.renew_delegation_token.v1.request import RenewDelegationTokenRequest as _RenewV1
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest as _RenewV2

# key 38
CreateDelegationTokenRequest = Union[_CreateV1, _CreateV2, _CreateV3]
# key 39
RenewDelegationTokenRequest = Union[_RenewV1, _RenewV2]
# key 40
ExpireDelegationTokenRequest = Union[_ExpireV1, _ExpireV2]
# key 41
DescribeDelegationTokenRequest = Union[_DescribeV1, _DescribeV2, _DescribeV3]
