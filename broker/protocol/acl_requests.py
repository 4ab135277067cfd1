"""The request types of the ACL APIs (broker/apis/acls.py), versions 1-3 each; listed in
broker/protocol/requests.py's BY_KEY."""

from __future__ import annotations

from typing import Union

from kio.schema.create_acls.v1.request import CreateAclsRequest as _CreateAclsRequestV1
from kio.schema.create_acls.v2.request import CreateAclsRequest as _CreateAclsRequestV2
from kio.schema.create_acls.v3.request import CreateAclsRequest as _CreateAclsRequestV3
from kio.schema.delete_acls.v1.request import DeleteAclsRequest as _DeleteAclsRequestV1
from kio.schema.delete_acls.v2.request import DeleteAclsRequest as _DeleteAclsRequestV2
from kio.schema.delete_acls.v3.request import DeleteAclsRequest as _DeleteAclsRequestV3
from kio.schema.describe_acls.v1.request import DescribeAclsRequest as _DescribeAclsRequestV1
from kio.schema.describe_acls.v2.request import DescribeAclsRequest as _DescribeAclsRequestV2
from kio.schema.describe_acls.v3.request import DescribeAclsRequest as _DescribeAclsRequestV3

# key 29
DescribeAclsRequest = Union[
    _DescribeAclsRequestV1,
    _DescribeAclsRequestV2,
    _DescribeAclsRequestV3,
]

# key 30
CreateAclsRequest = Union[
    _CreateAclsRequestV1,
    _CreateAclsRequestV2,
    _CreateAclsRequestV3,
]

# key 31
DeleteAclsRequest = Union[
    _DeleteAclsRequestV1,
    _DeleteAclsRequestV2,
    _DeleteAclsRequestV3,
]
