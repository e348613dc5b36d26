"""Chains on a running lab.

- :mod:`.chains`: list, inspect, classifier entries, label traces; :mod:`.classify`: a file of
  classifiers added to a chain (``chain classify``), all or nothing;
- :mod:`.request`: one typed request per operation (``AddChain``, ``RemoveChain``,
  ``MigrateInstance``), shared by the command line and the HTTP API;
- :mod:`.add` (``add_chain``, ``remove_chain``), :mod:`.migrate` (``migrate``): the library
  entry points, each taking its request; :mod:`.handover`: the steps of a migration that run
  where a node lives; :mod:`.capacity`: the hosts as placement sees them;
- :mod:`.health`: the lab's watcher, failover; :mod:`.record`: what they keep in the lab's state;
  :mod:`.wire`, :mod:`.tables`, :mod:`.conntrack`: nodes, map entries, connection tracking;
  :mod:`.underlay`: the underlay for added instances' tunnels;
- :mod:`.hostops`: hosts added to and removed from a running lab (``sfclab host``);
- on labs of hosts driven over SSH, this machine's side: :mod:`.sshadd` (chain add, rm),
  :mod:`.sshmigrate` (migrate), :mod:`.sshhealth` (a watcher on every host), :mod:`.sshhost`
  (a real machine joining); each host's side, run by its agent: :mod:`.agent_chain`,
  :mod:`.agent_conntrack`, :mod:`.agent_health`; the watchers' talk over the underlay:
  :mod:`.peerwatch`, its messages :mod:`.peermsg`, what a watcher knows :mod:`.peertable`.
"""
