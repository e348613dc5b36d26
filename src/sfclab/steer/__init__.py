"""Chains on a running lab.

- :mod:`.chains`: list, inspect, classifier entries (``chain classify``), label traces;
- :mod:`.request`: one typed request per operation (``AddChain``, ``RemoveChain``,
  ``MigrateInstance``), shared by the command line and the HTTP API;
- :mod:`.add` (``add_chain``, ``remove_chain``), :mod:`.migrate` (``migrate``): the library
  entry points, each taking its request;
- :mod:`.health`: the lab's watcher, failover; :mod:`.record`: what they keep in the lab's state;
  :mod:`.wire`, :mod:`.tables`, :mod:`.conntrack`: nodes, map entries, connection tracking.
"""
