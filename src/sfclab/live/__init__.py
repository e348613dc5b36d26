"""Operations on a running lab: chains added, removed, classified, traced and migrated; health
and failover; hosts added and removed.

Sub-packages, top first (the import-linter contract "Live" in ``pyproject.toml`` keeps the
order: a sub-package imports only those below it):

- :mod:`.ops`: the library entry points, each taking its request; they plan, then ask the
  lab's runtime;
- :mod:`.runtime`: the runtimes' operations on a running lab (the interface, its table, this
  machine's and SSH's implementations, the agent's verbs on a host driven over SSH);
- :mod:`.health`: the lab's watcher: probes, failover, the watchers' talk between hosts;
- :mod:`.chains`: a chain's parts: map entries, nodes made for it, a migration's steps and
  records, connection tracking, label traces;
- :mod:`.hosts`: the hosts as placement sees them, the underlay for added instances' tunnels,
  joining a machine over SSH;
- :mod:`.record`: what they all keep in the lab's state; :mod:`.request`: one typed request
  per operation (``AddChain``, ``RemoveChain``, ``MigrateInstance``), shared by the command
  line and the HTTP API.
"""
