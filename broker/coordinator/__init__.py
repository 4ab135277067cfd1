"""The coordinator process's API handlers: group membership, offsets, group administration
(one module per API family, each registered with broker/coordinator/api.py's decorator)."""
