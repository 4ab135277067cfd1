"""Kafka's ACLs, one job per module: ``model`` (the enums with their wire codes, bindings and
filters), ``parsing`` (Kafka's string forms: enum names, principals, super.users),
``validation`` (what the ACL APIs accept), ``authorizer`` (AclRules: Kafka's AclAuthorizer
decisions), ``zk_layout`` (Kafka's znode paths and JSON) and ``store`` (reading and writing
them: in ZooKeeper, or in a file). All but ``store`` are pure; none imports broker/."""
