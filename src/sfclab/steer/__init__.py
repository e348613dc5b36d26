"""Chains on a running lab.

- :mod:`.chains`: list, inspect, classifier entries (``chain classify``, :mod:`.classify`),
  label traces (:mod:`.trace`);
- :mod:`.request`: one typed request per operation (``AddChain``, ``RemoveChain``,
  ``MigrateInstance``), shared by the command line and the HTTP API;
- :mod:`.add` (``add_chain``, ``remove_chain``), :mod:`.migrate` (``migrate``), :mod:`.hostops`
  (``host add``/``rm``/``ls``): the library entry points, each taking its request; they plan,
  then ask the lab's runtime (:mod:`.live_table`) to make it; :mod:`.handover`: the steps of
  a migration that run where a node lives; :mod:`.capacity`: the hosts as placement sees them;
- the runtimes' operations on a running lab: :mod:`.live` (the interface, with
  :mod:`.live_table`), :mod:`.live_local` with :mod:`.live_local_migrate` (this machine),
  :mod:`.live_ssh` with :mod:`.live_ssh_migrate`, :mod:`.live_ssh_trace`,
  :mod:`.live_ssh_join` (hosts driven over SSH), :mod:`.moves` (a migration's records and
  plans, whichever makes it);
- :mod:`.health`: the lab's watcher, failover (:mod:`.watcher`: its process);
  :mod:`.record`: what they keep in the lab's state; :mod:`.wire`, :mod:`.tables`,
  :mod:`.classify_maps`, :mod:`.conntrack`: nodes, map entries, connection tracking;
  :mod:`.underlay`: the underlay for added instances' tunnels;
- the agent's verbs on a host driven over SSH: :mod:`.agent_chain`, :mod:`.agent_health`,
  :mod:`.agent_conntrack`, all in one table with the realize agent's, :mod:`.agent_verbs`;
  the watchers' talk over the underlay: :mod:`.peerwatch`, its messages :mod:`.peermsg`, what a
  watcher knows :mod:`.peertable`.
"""
