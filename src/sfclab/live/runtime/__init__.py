"""Each host runtime's operations on a running lab.

- :mod:`.base`: the interface, :class:`~sfclab.live.runtime.base.LiveRuntime`, extending the
  realize layer's host runtime with what ``chain add``/``rm``, health, ``chain migrate`` and
  ``host add``/``rm`` need; :mod:`.table`: each runtime's class by name and ``live_for``, the
  lookup every operation on a running lab starts from;
- :mod:`.local` with :mod:`.local_migrate`: this machine makes everything, journaled in its
  journal;
- :mod:`.agents` with :mod:`.agents_migrate` and :mod:`.agents_trace`: hosts each driven by its
  agent, each making its share, journaled there; :mod:`.ssh` (each call one SSH connection)
  and :mod:`.kubernetes` (each call a request to the agent of the host's Node) implement it;
- the host agent's verbs (run over SSH, or by a Kubernetes Node's agent on request):
  :mod:`.agent_chain`, :mod:`.agent_health`, :mod:`.agent_conntrack`, :mod:`.agent_containers`,
  :mod:`.agent_proc`, all in one table with the realize agent's, :mod:`.agent_verbs`.
"""
