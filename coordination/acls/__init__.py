"""Kafka's ACLs: the model, its string forms, the checks the ACL APIs make, the authorizer
and the ZooKeeper layout, one module each (see each module's docstring)."""
